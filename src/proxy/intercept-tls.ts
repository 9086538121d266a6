/**
 * Terminates the TLS a client opened inside a CONNECT tunnel to a governed host (docs/design.md §4.2),
 * with a leaf certificate for the CONNECT host issued by the local CA. The decrypted socket is
 * then served like a plain-HTTP tunnel, its requests being `https://` targets.
 */
import { Duplex } from 'node:stream';
import { createSecureContext, type SecureContext, TLSSocket } from 'node:tls';
import type { CertificateAuthority, LeafCertificate } from './certificate-authority.js';

/**
 * One TLS context per leaf, built once: parsing the key and certificate for every new connection
 * was about a quarter of the proxy's CPU per handshake. Keyed weakly by the CA's cached leaf, so a
 * context goes when its leaf is evicted.
 */
const contexts = new WeakMap<LeafCertificate, SecureContext>();

function contextFor(leaf: LeafCertificate): SecureContext {
  let context = contexts.get(leaf);
  if (context === undefined) {
    context = createSecureContext({ key: leaf.key, cert: leaf.cert, minVersion: 'TLSv1.2' });
    contexts.set(leaf, context);
  }
  return context;
}

/** Resolves with the server side of the TLS session once the leaf for `host` is ready. */
export async function interceptTls(
  client: Duplex,
  host: string,
  ca: CertificateAuthority,
): Promise<TLSSocket> {
  const leaf = await ca.leafFor(host);
  const secureContext = contextFor(leaf);
  const tls = new TLSSocket(jsStream(client), {
    isServer: true,
    secureContext,
    // The gate parses HTTP/1.1 only; without ALPN h2 a client never tries HTTP/2 in the tunnel.
    ALPNProtocols: ['http/1.1'],
  });
  // A client that does not trust the CA aborts the handshake: nothing to answer, just close.
  tls.once('error', () => tls.destroy());
  tls.once('close', () => client.destroy());
  return tls;
}

/**
 * A JS-level view of `client`. A TLSSocket over a net.Socket reads its native handle directly,
 * which would skip the ClientHello the tunnel peek read and put back (`unshift`); over a plain
 * Duplex it reads through the stream, put-back bytes first.
 */
function jsStream(client: Duplex): Duplex {
  const view = new Duplex({
    read(): void {
      client.resume();
    },
    write(chunk: Buffer, _encoding, callback): void {
      client.write(chunk, callback);
    },
    final(callback): void {
      client.end(callback);
    },
    destroy(err, callback): void {
      client.destroy(err ?? undefined);
      callback(err);
    },
  });
  client.on('data', (chunk: Buffer) => {
    if (!view.push(chunk)) client.pause();
  });
  client.once('end', () => view.push(null));
  client.once('close', () => view.destroy());
  return view;
}
