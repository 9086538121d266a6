/**
 * Real TLS ClientHellos for tests that need a tunnel's first bytes without a TLS server: Node's
 * own TLS client writes its hello into a socket that only records it.
 */
import { Duplex } from 'node:stream';
import { connect } from 'node:tls';

/** The first flight Node's TLS client sends for `servername` (no SNI when `null`, as for an IP). */
export function clientHello(servername: string | null): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const wire = new Duplex({
      read(): void {},
      write(chunk: Buffer, _encoding, callback): void {
        resolve(Buffer.from(chunk));
        callback();
        setImmediate(() => tls.destroy());
      },
    });
    const tls = connect({ socket: wire, ...(servername === null ? { host: '127.0.0.1' } : { servername }) });
    tls.on('error', () => {});
    setTimeout(() => reject(new Error('no ClientHello written')), 2_000).unref();
  });
}

/** `hello` split into TLS records of at most `size` handshake bytes each (as some stacks send it). */
export function fragmentRecords(hello: Buffer, size: number): Buffer {
  const body = hello.subarray(5, 5 + hello.readUInt16BE(3));
  const records: Buffer[] = [];
  for (let at = 0; at < body.length; at += size) {
    const part = body.subarray(at, at + size);
    const header = Buffer.from([0x16, hello[1]!, hello[2]!, 0, 0]);
    header.writeUInt16BE(part.length, 3);
    records.push(header, part);
  }
  return Buffer.concat(records);
}
