import type { CompiledPath, Tool } from '../policy/index.js';
import type { ArgumentDocument } from './argument-document.js';
import { canonicalJson, hmacRef, sha256Ref } from './canonical-json.js';
import type { GateRequest, HeaderMap } from './types.js';

/** A deep copy of `doc` without the nodes `paths` match (volatile and secret fields). */
export function withoutPaths(doc: ArgumentDocument, paths: readonly CompiledPath[]): unknown {
  // Most tools declare nothing to strip: skip the deep copy on the request path then.
  if (paths.length === 0) return doc;
  const copy = structuredClone({ path: doc.path, query: doc.query, body: doc.body });
  for (const p of paths) p.remove(copy);
  return copy;
}

/**
 * Fingerprint of the canonical request (RFC 8785) minus the tool's volatile (`fingerprint.ignore`)
 * and secret (`redact`) fields: two attempts of one operation compare equal unless the request
 * changed materially (docs/design.md §3). Headers are not part of it: credentials and
 * transport noise live there; the authority is recorded apart as `authorityRef`.
 */
export function requestFingerprint(request: GateRequest, tool: Tool, args: ArgumentDocument): string {
  const stripped = withoutPaths(args, [...tool.fingerprintIgnore, ...tool.redact]) as Record<string, unknown>;
  const body =
    args.body === undefined && request.body.byteLength > 0
      ? { raw_sha256: sha256Ref(request.body) }
      : stripped.body;
  return sha256Ref(
    canonicalJson({
      method: request.method,
      scheme: request.scheme,
      host: request.host,
      port: request.port,
      path: stripped.path,
      query: stripped.query,
      body: body ?? null,
    }),
  );
}

/** Headers that carry credentials: never stored, only fingerprinted (keyed) as an authority reference. */
export const CREDENTIAL_HEADERS: readonly string[] = Object.freeze([
  'authorization',
  'x-api-key',
  'api-key',
  'x-auth-token',
  'private-token',
  'cookie',
]);

/**
 * A reference to the credential the agent used, never the credential: a keyed HMAC when the gate
 * has an authority key (comparable across attempts and restarts), otherwise only which header
 * carried it.
 */
export function authorityRef(headers: HeaderMap, key: string | null): string | null {
  for (const name of CREDENTIAL_HEADERS) {
    const v = headers[name];
    if (v === undefined) continue;
    const value = Array.isArray(v) ? v.join(',') : v;
    return key === null ? `header:${name}` : `${name}:${hmacRef(key, value)}`;
  }
  return null;
}
