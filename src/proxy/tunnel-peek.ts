/**
 * Reads the first bytes of a CONNECT tunnel, before anything is relayed or served, to say what it
 * carries (docs/design.md §4.2): plain HTTP, or TLS, whose whole ClientHello is read so its SNI can be
 * routed. Bounded both ways: at most `MAX_CLIENT_HELLO_BYTES` are buffered, and a tunnel that does
 * not say what it carries within the peek timeout is closed. Whatever was read is put back
 * (`unshift`) for whoever reads the stream next.
 */
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { parseClientHello, TLS_HANDSHAKE_RECORD } from './client-hello.js';

export type Peeked =
  /** The client spoke first and not TLS: plain HTTP (or garbage node:http will answer 400). */
  | { readonly kind: 'http' }
  /** A complete ClientHello; `serverName` null when it has no SNI. */
  | { readonly kind: 'tls'; readonly serverName: string | null }
  /** TLS the gate cannot read (malformed, too large, or the destination spoke during it). */
  | { readonly kind: 'bad_tls'; readonly reason: string }
  /** The destination spoke first: not an HTTP server (SMTP, MySQL on an allowed port). */
  | { readonly kind: 'server_first' }
  /** The client went away before saying what the tunnel carries. */
  | { readonly kind: 'closed' }
  /** Nothing decisive came within the peek timeout. */
  | { readonly kind: 'timeout' };

/**
 * Calls `done` exactly once. On `http` and `tls` the client's bytes were put back into `client`, on
 * `server_first` the destination's into `upstream`; both streams are left paused.
 */
export function peekTunnel(
  client: Duplex,
  head: Buffer,
  upstream: Socket,
  timeoutMs: number,
  done: (peeked: Peeked) => void,
): void {
  let buffered = head;
  let finished = false;
  /** `putBack`: the client's bytes go back into `client`; `upstreamFirst`: that chunk into `upstream`. */
  const finish = (peeked: Peeked, putBack: boolean, upstreamFirst?: Buffer): void => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    client.off('data', onClient);
    client.off('end', onClientGone);
    client.off('close', onClientGone);
    upstream.off('data', onUpstream);
    client.pause();
    upstream.pause();
    // Only once no `data` listener is left: unshift re-emits into a flowing stream.
    if (putBack && buffered.length > 0) client.unshift(buffered);
    if (upstreamFirst !== undefined) upstream.unshift(upstreamFirst);
    done(peeked);
  };
  /** Decides from what the client sent so far, or waits for more. */
  const judge = (): void => {
    if (buffered.length === 0) return;
    if (buffered[0] !== TLS_HANDSHAKE_RECORD) {
      finish({ kind: 'http' }, true);
      return;
    }
    const hello = parseClientHello(buffered);
    if (hello.kind === 'hello') finish({ kind: 'tls', serverName: hello.serverName }, true);
    else if (hello.kind === 'invalid') finish({ kind: 'bad_tls', reason: hello.reason }, false);
  };
  const onClient = (chunk: Buffer): void => {
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
    judge();
  };
  const onUpstream = (chunk: Buffer): void => {
    if (buffered.length > 0) {
      // A TLS server never speaks before the ClientHello is complete: nothing sane to relay.
      finish({ kind: 'bad_tls', reason: 'the destination spoke during the ClientHello' }, false);
      return;
    }
    finish({ kind: 'server_first' }, false, chunk);
  };
  const onClientGone = (): void => finish({ kind: 'closed' }, false);
  const timer = setTimeout(() => finish({ kind: 'timeout' }, false), timeoutMs);
  timer.unref();

  judge();
  if (finished) return;
  client.on('data', onClient);
  client.once('end', onClientGone);
  client.once('close', onClientGone);
  upstream.on('data', onUpstream);
}
