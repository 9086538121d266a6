import { describe, expect, it } from 'vitest';
import { MAX_CLIENT_HELLO_BYTES, parseClientHello } from '../../../src/proxy/client-hello.js';
import { clientHello, fragmentRecords } from '../../helpers/client-hello.js';

describe('parseClientHello (SNI of a tunnel)', () => {
  it("reads the SNI of Node's own ClientHello", async () => {
    expect(parseClientHello(await clientHello('api.github.com'))).toEqual({
      kind: 'hello',
      serverName: 'api.github.com',
    });
  });

  it('says there is no SNI when the client sent none (an IP literal)', async () => {
    expect(parseClientHello(await clientHello(null))).toEqual({ kind: 'hello', serverName: null });
  });

  it('asks for more bytes on every prefix, then reads the whole hello', async () => {
    const hello = await clientHello('example.test');
    for (const cut of [1, 4, 5, 6, 43, 100, hello.length - 1]) {
      expect(parseClientHello(hello.subarray(0, cut))).toEqual({ kind: 'incomplete' });
    }
  });

  it('joins a ClientHello fragmented over several records', async () => {
    const split = fragmentRecords(await clientHello('split.example.test'), 50);
    expect(parseClientHello(split)).toEqual({ kind: 'hello', serverName: 'split.example.test' });
    expect(parseClientHello(split.subarray(0, split.length - 3))).toEqual({ kind: 'incomplete' });
  });

  it('refuses what is not a readable ClientHello, within a bounded buffer', async () => {
    const hello = await clientHello('example.test');
    const notHello = Buffer.from(hello);
    notHello[5] = 2; // ServerHello
    expect(parseClientHello(notHello).kind).toBe('invalid');
    const huge = Buffer.from(hello.subarray(0, 9));
    huge.writeUInt16BE(0x4000, 3);
    huge.writeUIntBE(MAX_CLIENT_HELLO_BYTES, 6, 3);
    expect(parseClientHello(huge).kind).toBe('invalid');
    const truncated = Buffer.from(hello);
    truncated.writeUIntBE(10, 6, 3); // handshake claims 10 bytes: cut inside the random
    truncated.writeUInt16BE(14, 3);
    expect(parseClientHello(truncated.subarray(0, 19)).kind).toBe('invalid');
    const alert = Buffer.from([0x16, 3, 1, 0, 2, 1, 0, 0x15, 3, 3, 0, 2]);
    expect(parseClientHello(alert).kind).toBe('invalid');
  });

  it('refuses an SNI that is not a DNS name', async () => {
    const hello = await clientHello('abc.example.test');
    const at = hello.indexOf('abc.example.test');
    const bad = Buffer.from(hello);
    bad.write('a/c', at, 'latin1');
    expect(parseClientHello(bad)).toMatchObject({ kind: 'invalid' });
  });
});
