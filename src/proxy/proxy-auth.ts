/**
 * Proxy authentication of a shared proxy (docs/design.md §4.2): the `Proxy-Authorization` credential,
 * checked against the agents file, is the ONLY source of a request's scope. `Basic` carries
 * `id:secret` (what `HTTPS_PROXY=http://id:secret@host:port` makes curl, Python and undici send),
 * `Bearer` the secret alone. Secrets are compared as SHA-256 digests with `timingSafeEqual`.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { AgentRegistry } from '../config/index.js';
import type { GateHandler, GateResponse } from '../engine/index.js';
import type { Scope } from '../store/index.js';

export const PROXY_AUTHENTICATE = 'Basic realm="effectgate"';

/** The scope a credential proves, or the 407 to answer. */
export type AuthResult =
  | { readonly ok: true; readonly scope: Scope }
  | { readonly ok: false; readonly response: GateResponse };

/** A digest no secret hashes to in practice; compared against when the id is unknown. */
const NO_DIGEST = Buffer.alloc(32);

export class ProxyAuthenticator {
  readonly #agents: AgentRegistry;
  readonly #gate: GateHandler;

  constructor(agents: AgentRegistry, gate: GateHandler) {
    this.#agents = agents;
    this.#gate = gate;
  }

  /** Checks the request's `Proxy-Authorization`; never reads any other header. */
  authenticate(headers: IncomingHttpHeaders): AuthResult {
    const raw = headers['proxy-authorization'];
    if (raw === undefined || raw === '') {
      return this.#refuse(
        'This proxy requires agent credentials: send Proxy-Authorization (e.g. HTTPS_PROXY=http://<id>:<secret>@host:port, or Bearer <secret>). Nothing was sent.',
      );
    }
    const scope = this.#verify(raw);
    if (scope === null) {
      return this.#refuse(
        'The proxy credentials are not valid: check the agent id and secret in your proxy URL or Bearer token. Nothing was sent.',
      );
    }
    return { ok: true, scope };
  }

  #verify(value: string): Scope | null {
    const space = value.indexOf(' ');
    if (space === -1) return null;
    const scheme = value.slice(0, space).toLowerCase();
    const token = value.slice(space + 1).trim();
    if (token === '') return null;
    if (scheme === 'bearer') {
      const digest = sha256(token);
      const entry = this.#agents.bySecretSha256(digest);
      if (entry === undefined || !timingSafeEqual(digest, entry.secretSha256)) return null;
      return entry.scope;
    }
    if (scheme === 'basic') {
      const decoded = Buffer.from(token, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon === -1) return null;
      const entry = this.#agents.byId(decoded.slice(0, colon));
      const digest = sha256(decoded.slice(colon + 1));
      // Compare even for an unknown id, so its answer takes as long as a wrong secret's.
      const same = timingSafeEqual(digest, entry?.secretSha256 ?? NO_DIGEST);
      return entry !== undefined && same ? entry.scope : null;
    }
    return null;
  }

  #refuse(detail: string): AuthResult {
    const r = this.#gate.refuse(null, 'proxy_auth_required', detail);
    return {
      ok: false,
      response: { ...r, headers: { ...r.headers, 'proxy-authenticate': PROXY_AUTHENTICATE } },
    };
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
