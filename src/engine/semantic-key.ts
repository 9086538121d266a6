import type { Tool } from '../policy/index.js';
import type { Scope } from '../store/index.js';
import type { ArgumentDocument } from './argument-document.js';
import { canonicalJson, sha256Ref } from './canonical-json.js';

export type SemanticKey =
  | { readonly ok: true; readonly hash: string; readonly values: readonly unknown[] }
  | { readonly ok: false; readonly missing: readonly string[] };

/** Version of the key layout; bump it if the hashed shape ever changes, so old keys never collide. */
const KEY_LAYOUT = 1;

/**
 * Builds the semantic duplicate key of a proposal (seed: duplicate-effect-recognition).
 *
 * Scope (tenant, area, agent) and the tool id are always hashed in; neither the agent nor the
 * curator can remove them, so identical arguments in two tenants never collide. The agent version
 * is deliberately not part of it. A declared path that matches nothing is an error (`missing`),
 * never an empty value, and the whole body is never hashed as a fallback.
 *
 * `values` are what the store keeps for investigators; a key path the tool also lists in `redact`
 * is kept only as a fingerprint.
 */
export function buildSemanticKey(tool: Tool, scope: Scope, args: ArgumentDocument): SemanticKey {
  const dedupe = tool.dedupe;
  if (dedupe === null) throw new Error(`tool ${tool.id} has no dedupe block`);
  const values: unknown[] = [];
  const missing: string[] = [];
  for (const path of dedupe.key) {
    const found = path.evaluate(args);
    if (found.length === 0 || found.every((v) => v === undefined)) missing.push(path.expression);
    else values.push(found.length === 1 ? found[0] : found);
  }
  if (missing.length > 0) return { ok: false, missing };
  const hash = sha256Ref(
    canonicalJson({
      v: KEY_LAYOUT,
      tenant: scope.tenant,
      area: scope.area,
      agent: scope.agent,
      tool: tool.id,
      key: values,
    }),
  );
  const redacted = new Set(tool.redact.map((p) => p.expression));
  const stored = dedupe.key.map((path, i) =>
    redacted.has(path.expression) ? sha256Ref(canonicalJson(values[i])) : values[i],
  );
  return { ok: true, hash, values: stored };
}
