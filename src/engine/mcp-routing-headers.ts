import { ArgumentRefusal } from './argument-refusal.js';
import type { GateRequestHead } from './types.js';

/**
 * MCP 2026-07-28 mirrors the JSON-RPC `method` into an `Mcp-Method` header and the call's target
 * into `Mcp-Name` (`params.name` of `tools/call` and `prompts/get`, `params.uri` of
 * `resources/read`), "so that intermediaries can route and inspect requests without parsing the
 * body", and requires servers to reject a mismatch. The gate classifies by the body; a header
 * that says otherwise is refused on a governed route, never believed over the body or ignored.
 *
 * @throws {ArgumentRefusal} `headers_disagree` (400) naming the header and the body's path.
 * @example refuseDisagreeingMcpHeaders({ headers: { 'mcp-method': 'tools/list' } }, { method: 'tools/call' }) // throws
 */
export function refuseDisagreeingMcpHeaders(head: Pick<GateRequestHead, 'headers'>, body: unknown): void {
  const method = single(head.headers['mcp-method']);
  const name = single(head.headers['mcp-name']);
  if (method === undefined && name === undefined) return;
  const rpc =
    body !== null && typeof body === 'object' && !Array.isArray(body)
      ? (body as Record<string, unknown>)
      : {};
  if (method !== undefined && method !== rpc['method']) {
    throw ArgumentRefusal.headersDisagree('Mcp-Method', method, '$.body.method', rpc['method']);
  }
  if (name !== undefined) {
    const params = rpc['params'];
    const p = params !== null && typeof params === 'object' ? (params as Record<string, unknown>) : {};
    const path = rpc['method'] === 'resources/read' ? 'uri' : 'name';
    if (name !== p[path])
      throw ArgumentRefusal.headersDisagree('Mcp-Name', name, `$.body.params.${path}`, p[path]);
  }
}

/** A header given once; given twice it is its own disagreement, reported with the values joined. */
function single(value: string | string[] | undefined): string | undefined {
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(', ') : value;
}
