/**
 * Per-request logic of the forward proxy: absolute-form requests (`GET http://host/path`) and
 * origin-form requests read inside a CONNECT tunnel (whose target is the tunnel's authority).
 * A thin adapter: the `GateHandler` decides; this translates node:http to and from its shapes.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GateHandler, GateRequestHead, GateResponse } from '../engine/index.js';
import { normalizeHead, problemResponse } from '../engine/index.js';
import type { Scope } from '../store/index.js';
import { parseAbsoluteTarget, parseTunnelTarget } from './parse-target.js';
import type { ProxyAuthenticator } from './proxy-auth.js';
import { declaredLength, drainRequest, hasBody, readBody } from './request-body.js';
import type { TunnelSockets } from './tunnel-sockets.js';
import type { UpstreamClient } from './upstream-client.js';
import { writeGateResponse } from './write-response.js';

export interface ForwardHandlerOptions {
  readonly gate: GateHandler;
  readonly upstream: UpstreamClient;
  /** Sockets that are CONNECT tunnels carrying plain HTTP. */
  readonly tunnels: TunnelSockets;
  /** Agents file credentials (`--agents`): every request must prove its scope. Absent: sidecar. */
  readonly auth?: ProxyAuthenticator | undefined;
}

/**
 * The normalized head of a proxied request and the target to forward (the normalized path plus
 * the query as sent), or the refusal to send instead.
 */
export type ResolvedRequest =
  | { readonly ok: true; readonly head: GateRequestHead; readonly pathAndQuery: string }
  | { readonly ok: false; readonly response: GateResponse };

/**
 * Authenticates the request (with `auth`; inside a CONNECT tunnel the tunnel's scope is
 * inherited), parses the target (absolute-form, or any form inside the tunnel `socket` is) and
 * normalizes the head; shared with the upgrade path. The head's `scope` comes only from here.
 */
export function resolveRequest(
  gate: GateHandler,
  req: IncomingMessage,
  socket: object,
  tunnels: TunnelSockets,
  auth: ProxyAuthenticator | undefined,
): ResolvedRequest {
  const inTunnel = tunnels.tunnelOf(socket);
  let scope = inTunnel?.scope;
  if (auth !== undefined && inTunnel === undefined) {
    const proved = auth.authenticate(req.headers);
    if (!proved.ok) return { ok: false, response: proved.response };
    scope = proved.scope;
  }
  if (auth !== undefined && scope === undefined) {
    // Unreachable: every tunnel of an authenticating proxy was opened by an authenticated CONNECT.
    return { ok: false, response: gate.refuse(null, 'proxy_auth_required', 'No agent credentials.') };
  }
  const tunnel = inTunnel?.authority;
  const url = req.url ?? '';
  const parsed =
    tunnel === undefined ? parseAbsoluteTarget(url) : parseTunnelTarget(url, tunnel, req.headers.host);
  if (!parsed.ok) return { ok: false, response: gate.refuse(null, 'bad_request', parsed.reason) };
  const target = parsed.value;
  // Inside an intercepted TLS tunnel the target is https (the gate terminated TLS for it).
  if (target.scheme === 'https' && tunnel?.scheme !== 'https') {
    const detail =
      'https:// URLs are not sent to the proxy as absolute-form requests: the client must open a CONNECT tunnel (use HTTPS_PROXY).';
    return { ok: false, response: gate.refuse(null, 'bad_request', detail) };
  }
  const normalized = normalizeHead({
    scheme: target.scheme,
    method: req.method ?? 'GET',
    host: target.host,
    port: target.port,
    pathAndQuery: target.pathAndQuery,
    headers: req.headers,
  });
  // The client's address names its run when it names none (engine run-identity.ts): the tunnel's
  // peer inside one (the TLS socket of an intercepted tunnel has none of its own), else the socket's.
  const client = inTunnel === undefined ? req.socket.remoteAddress : inTunnel.peer;
  const head = withIdentity(normalized, scope, client);
  // The destination gets the path the gate classified (see `normalizePath`), never the raw one.
  const q = target.pathAndQuery.indexOf('?');
  const pathAndQuery = q === -1 ? head.path : `${head.path}${target.pathAndQuery.slice(q)}`;
  return { ok: true, head, pathAndQuery };
}

/**
 * `head` with its scope and client address. Written out, not spread: this runs for every request,
 * and spreading a head (and the conditional objects around it) costs several allocations.
 */
function withIdentity(
  head: GateRequestHead,
  scope: Scope | undefined,
  client: string | undefined,
): GateRequestHead {
  if (scope === undefined && client === undefined) return head;
  const { scheme, method, host, port, path, query, headers, context } = head;
  if (scope === undefined) return { scheme, method, host, port, path, query, headers, context, client };
  if (client === undefined) return { scheme, method, host, port, path, query, headers, context, scope };
  return { scheme, method, host, port, path, query, headers, context, scope, client };
}

export class ForwardHandler {
  readonly #gate: GateHandler;
  readonly #upstream: UpstreamClient;
  readonly #tunnels: TunnelSockets;
  readonly #auth: ProxyAuthenticator | undefined;

  constructor(options: ForwardHandlerOptions) {
    this.#gate = options.gate;
    this.#upstream = options.upstream;
    this.#tunnels = options.tunnels;
    this.#auth = options.auth;
  }

  /**
   * Serves one request. `expectContinue` is set for `Expect: 100-continue` requests: the interim
   * response is sent only once the gate will read the body (RFC 9110 §10.1.1), so an oversized
   * governed upload is refused before the client sends it.
   */
  handle(req: IncomingMessage, res: ServerResponse, expectContinue = false): void {
    this.#handle(req, res, expectContinue).catch(() => {
      // Only an engine bug gets here (`GateHandler.handle()` never throws by contract).
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const response = problemResponse({
        status: 500,
        problem: 'internal_error',
        title: 'Gate internal error',
        detail: 'The gate failed while handling this request; whether it reached the destination is unknown.',
      });
      this.#refuse(req, res, response);
    });
  }

  async #handle(req: IncomingMessage, res: ServerResponse, expectContinue: boolean): Promise<void> {
    const resolved = resolveRequest(this.#gate, req, req.socket, this.#tunnels, this.#auth);
    if (!resolved.ok) {
      this.#refuse(req, res, resolved.response);
      return;
    }
    const { head, pathAndQuery } = resolved;
    const decision = this.#gate.route(head);
    switch (decision.kind) {
      case 'refuse':
        this.#refuse(req, res, decision.response);
        return;
      case 'pass':
        if (expectContinue) res.writeContinue();
        await this.#upstream.stream(
          {
            scheme: head.scheme,
            method: req.method ?? head.method,
            host: head.host,
            port: head.port,
            pathAndQuery,
            // normalizeHead's copy, sent as is: the ungoverned path copies the header map once.
            headers: head.headers,
            body: hasBody(req) ? req : null,
          },
          res,
        );
        return;
      case 'govern':
        await this.#govern(req, res, head, decision.maxBodyBytes, expectContinue);
        return;
    }
  }

  async #govern(
    req: IncomingMessage,
    res: ServerResponse,
    head: GateRequestHead,
    maxBodyBytes: number,
    expectContinue: boolean,
  ): Promise<void> {
    const declared = declaredLength(req);
    if (declared !== null && declared > maxBodyBytes) {
      this.#refuse(req, res, this.#tooLarge(head, maxBodyBytes, `declares ${declared} bytes`));
      return;
    }
    if (expectContinue) res.writeContinue();
    const read = await readBody(req, maxBodyBytes);
    if (read.kind === 'aborted') return;
    if (read.kind === 'too_large') {
      this.#refuse(req, res, this.#tooLarge(head, maxBodyBytes, 'is longer than that'));
      return;
    }
    const response = await this.#gate.handle({ ...head, body: read.body }, this.#upstream.send);
    writeGateResponse(res, response, req.method ?? head.method);
  }

  #tooLarge(head: GateRequestHead, limit: number, what: string): GateResponse {
    const detail = `Governed requests to ${head.host} may carry at most ${limit} bytes of body; this one ${what}. Nothing was sent.`;
    return this.#gate.refuse(head, 'body_too_large', detail);
  }

  /** Answers without reading the body, then drains what the client still sends. */
  #refuse(req: IncomingMessage, res: ServerResponse, response: GateResponse): void {
    writeGateResponse(res, response, req.method ?? 'GET', true);
    drainRequest(req);
  }
}
