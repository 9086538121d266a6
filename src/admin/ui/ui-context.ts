/**
 * What every page handler needs: the store and token it serves (`UiContext`), and the two reads
 * every page makes. Apart from index.ts (the router) so each page file can hold its own handler.
 */
import type { Store } from '../../store/index.js';

export interface UiContext {
  readonly store: Store;
  /** The admin token (`resolveAdminToken`); `null`: the pages are disabled and say how to enable them. */
  readonly token: string | null;
  /** Where unexpected failures are reported (never with the token). */
  readonly logger?: { error(fields: Record<string, unknown>, message: string): void } | undefined;
}

/** Open approval requests, for the navigation (at most 100 counted). */
export async function requestedCount(store: Store): Promise<number> {
  return (await store.listApprovals({ state: 'requested', limit: 100 })).length;
}

/** One query parameter, blank = absent; repeated → the first. */
export function param(query: URLSearchParams, name: string): string | undefined {
  const v = query.get(name)?.trim();
  return v === undefined || v === '' ? undefined : v;
}
