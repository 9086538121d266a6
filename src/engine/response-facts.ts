import type { Tool } from '../policy/index.js';

const decoder = new TextDecoder();

/**
 * The destination's own reference for the effect (e.g. the created issue's `html_url`), read with
 * the tool's `response.ref` JSONPath from a JSON response; `null` when absent or not JSON.
 */
export function extractDestinationRef(tool: Tool, body: Uint8Array): string | null {
  if (tool.response.ref === null || body.byteLength === 0) return null;
  let json: unknown;
  try {
    json = JSON.parse(decoder.decode(body));
  } catch {
    return null;
  }
  return destinationRefOf(tool, json);
}

/**
 * The tool's `response.ref` read from an already parsed JSON value (a response body, or one item
 * of a reconciliation lookup), at most 2048 characters; `null` when absent.
 */
export function destinationRefOf(tool: Tool, json: unknown): string | null {
  const found = tool.response.ref?.evaluate(json)[0];
  if (found === undefined || found === null) return null;
  const text = typeof found === 'string' ? found : JSON.stringify(found);
  return text.length > 2048 ? text.slice(0, 2048) : text;
}

/**
 * Whether the destination says it replayed a stored result (`response.replayed_header`, e.g.
 * Stripe's `Idempotent-Replayed: true`). `null` when the tool declares no such header: the gate
 * then cannot tell, and says so instead of guessing.
 */
export function readReplayed(
  tool: Tool,
  headers: Readonly<Record<string, string | string[]>>,
): boolean | null {
  const name = tool.response.replayedHeader;
  if (name === null) return null;
  const raw = headers[name.toLowerCase()];
  const v = (Array.isArray(raw) ? raw[0] : raw)?.trim().toLowerCase();
  if (v === undefined || v === '' || v === 'false' || v === '0') return false;
  return true;
}
