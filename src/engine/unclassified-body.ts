import type { Classification } from '../policy/index.js';
import { contentTypeOf } from './argument-document.js';
import { bodyLabel, readsAsFields } from './body-label.js';
import { foldNames } from './folded-reading.js';
import type { GateRequest } from './types.js';

/**
 * A request on a route whose tools are chosen by their body (`match.body`) that matched none of
 * them is unclassified, and relayed, unless the gate simply could not read what a destination may
 * (docs/design.md §2 "The reading rule"). Both checks take the body `#propose` already parsed
 * (`parseBody`: `undefined` for bytes that are not UTF-8 JSON), never parse it again.
 */

/**
 * Why a non-empty body could not be read as the JSON object body conditions look into, or null: a
 * content coding, bytes that are not UTF-8 JSON, or a JSON array (a JSON-RPC batch).
 */
export function unreadableBody(request: GateRequest, body: unknown): string | null {
  if (request.body.byteLength === 0) return null;
  const encoding = request.headers['content-encoding'];
  const coding = (Array.isArray(encoding) ? encoding.join(',') : (encoding ?? '')).trim().toLowerCase();
  if (coding !== '' && coding !== 'identity') return `Content-Encoding: ${coding}`;
  // A form or multipart body is always read (as fields); it reaches here only when no tool governs it.
  const label = bodyLabel(contentTypeOf(request));
  if (readsAsFields(label)) return null;
  if (body === undefined) return 'not UTF-8 JSON';
  if (Array.isArray(body)) return 'a JSON array (a batch): send one call per request';
  return null;
}

/**
 * The id of a candidate whose body conditions hold only with member names compared without letter
 * case (`"Name"` for `name`: Go's encoding/json binds it as the tool's call), or null.
 */
export function foldedMatch(body: unknown, candidates: readonly Classification[]): string | null {
  if (candidates.length === 0 || body === undefined) return null;
  const folded = foldNames(body);
  for (const c of candidates) if (c.tool.match.matchesBodyFolded(folded)) return c.tool.id;
  return null;
}
