import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { commitThenDestroy, echo, neverAnswer, reply } from '../../helpers/upstream.js';
import {
  hasFullResponse,
  rawConnect,
  responseBody,
  startProxy,
  upstream,
  useCleanup,
  viaProxy,
} from './harness.js';

useCleanup();

describe('forward proxy: governed requests', () => {
  it('buffers the body, hands it to handle() and sends it with content-length', async () => {
    const up = await upstream(reply(201, { id: 'issue-1' }));
    const { url, gate } = await startProxy({ govern: ['127.0.0.1'] });
    const res = await request(`${up.url}/repos/a/b/issues?x=1`, {
      dispatcher: viaProxy(url),
      method: 'POST',
      headers: { 'content-type': 'application/json', 'effectgate-run': 'run-7' },
      body: JSON.stringify({ title: 'hello' }),
    });
    expect(res.statusCode).toBe(201);
    expect(res.headers['effectgate-verdict']).toBe('allow');
    expect(res.headers['content-length']).toBe(String(JSON.stringify({ id: 'issue-1' }).length));
    expect(await res.body.json()).toEqual({ id: 'issue-1' });

    expect(gate.handled).toHaveLength(1);
    const handled = gate.handled[0]!;
    expect(Buffer.from(handled.body).toString()).toBe('{"title":"hello"}');
    expect(handled).toMatchObject({ method: 'POST', path: '/repos/a/b/issues', query: 'x=1' });
    expect(handled.context.run).toBe('run-7');
    expect(handled.headers['effectgate-run']).toBeUndefined();

    const seen = up.requests[0]!;
    expect(seen.url).toBe('/repos/a/b/issues?x=1');
    expect(seen.headers['content-length']).toBe('17');
    expect(seen.headers['idempotency-key']).toBe('fake-key');
    expect(seen.headers['effectgate-run']).toBeUndefined();
  });

  it('re-frames a chunked governed body with an explicit content-length', async () => {
    const up = await upstream(echo());
    const { port } = await startProxy({ govern: ['127.0.0.1'] });
    const client = await rawConnect(port);
    client.write(
      `POST ${up.url}/c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n`,
    );
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(responseBody(client.text)).toBe('abcdef');
    expect(up.requests[0]!.headers['content-length']).toBe('6');
    expect(up.requests[0]!.headers['transfer-encoding']).toBeUndefined();
  });

  it('refuses a declared body over the limit with 413 before reading it', async () => {
    const up = await upstream(reply());
    const { port, gate } = await startProxy({ govern: ['127.0.0.1'], maxBodyBytes: 1024 });
    const client = await rawConnect(port);
    // The body is never sent: the refusal must come from the declared length alone.
    client.write(`POST ${up.url}/big HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n\r\n`);
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 413 /);
    expect(JSON.parse(responseBody(client.text))).toMatchObject({
      type: 'urn:effectgate:problem:body_too_large',
    });
    expect(gate.refusals[0]!.problem).toBe('body_too_large');
    expect(gate.handled).toHaveLength(0);
    expect(up.requests).toHaveLength(0);
  });

  it('refuses a declared body over the limit for an ordinary client (undici, body sent)', async () => {
    const up = await upstream(reply());
    const { url, gate } = await startProxy({ govern: ['127.0.0.1'], maxBodyBytes: 1024 });
    const res = await request(`${up.url}/big`, {
      dispatcher: viaProxy(url),
      method: 'POST',
      body: Buffer.alloc(200_000, 'a'),
    });
    expect(res.statusCode).toBe(413);
    await res.body.dump();
    expect(gate.handled).toHaveLength(0);
    expect(up.requests).toHaveLength(0);
  });

  it('refuses a streamed chunked body once it passes the limit', async () => {
    const up = await upstream(reply());
    const { port, gate } = await startProxy({ govern: ['127.0.0.1'], maxBodyBytes: 1024 });
    const client = await rawConnect(port);
    client.write(`POST ${up.url}/stream HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n`);
    const chunk = 'y'.repeat(600);
    client.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
    client.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 413 /);
    expect(gate.handled).toHaveLength(0);
    expect(up.requests).toHaveLength(0);
    // The rest of the body is drained; finishing it leaves the connection usable.
    client.write('0\r\n\r\n');
    await new Promise((r) => setTimeout(r, 50));
    expect(client.closed).toBe(false);
  });

  it('answers 413 without 100 Continue to an oversized Expect: 100-continue upload', async () => {
    const up = await upstream(reply());
    const { port } = await startProxy({ govern: ['127.0.0.1'], maxBodyBytes: 1024 });
    const client = await rawConnect(port);
    client.write(
      `PUT ${up.url}/e HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\nExpect: 100-continue\r\n\r\n`,
    );
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 413 /);
    expect(client.text).not.toContain('100 Continue');
  });

  it('sends 100 Continue and governs an acceptable Expect: 100-continue upload', async () => {
    const up = await upstream(echo());
    const { port, gate } = await startProxy({ govern: ['127.0.0.1'] });
    const client = await rawConnect(port);
    client.write(`PUT ${up.url}/e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n`);
    await client.until((t) => t.includes('100 Continue'));
    client.write('hello');
    await client.until((t) => hasFullResponse(t.slice(t.indexOf('\r\n\r\n') + 4)));
    expect(client.text).toContain('HTTP/1.1 200 ');
    expect(Buffer.from(gate.handled[0]!.body).toString()).toBe('hello');
    expect(up.requests[0]!.headers['expect']).toBeUndefined();
  });

  it('writes the refusal of a route decision without contacting the upstream', async () => {
    const up = await upstream(reply());
    const { url } = await startProxy({ refuse: ['127.0.0.1'] });
    const res = await request(`${up.url}/blocked`, { dispatcher: viaProxy(url), method: 'POST', body: 'x' });
    expect(res.statusCode).toBe(403);
    expect(await res.body.json()).toEqual({ verdict: 'block' });
    expect(up.requests).toHaveLength(0);
  });

  it('passes a sent-without-response failure to the gate (commit then destroy)', async () => {
    const up = await upstream(commitThenDestroy());
    const { url, gate } = await startProxy({ govern: ['127.0.0.1'] });
    const res = await request(`${up.url}/effect`, { dispatcher: viaProxy(url), method: 'POST', body: '{}' });
    expect(res.statusCode).toBe(502);
    expect(await res.body.json()).toMatchObject({ dispatch_state: 'sent_no_response' });
    expect(gate.results[0]).toMatchObject({
      kind: 'failure',
      dispatchState: 'sent_no_response',
      timedOut: false,
    });
  });

  it('passes a timeout to the gate as sent_no_response, timed out', async () => {
    const up = await upstream(neverAnswer());
    const { url, gate } = await startProxy(
      { govern: ['127.0.0.1'] },
      { upstream: { headersTimeoutMs: 200 } },
    );
    const res = await request(`${up.url}/slow`, { dispatcher: viaProxy(url), method: 'POST', body: '{}' });
    expect(res.statusCode).toBe(504);
    await res.body.dump();
    expect(gate.results[0]).toMatchObject({ dispatchState: 'sent_no_response', timedOut: true });
  });

  it('passes ECONNREFUSED to the gate as not_sent', async () => {
    const up = await upstream();
    const dead = up.url;
    await up.close();
    const { url, gate } = await startProxy({ govern: ['127.0.0.1'] });
    const res = await request(`${dead}/x`, { dispatcher: viaProxy(url), method: 'POST', body: '{}' });
    expect(res.statusCode).toBe(502);
    await res.body.dump();
    expect(gate.results[0]).toEqual({
      kind: 'failure',
      dispatchState: 'not_sent',
      timedOut: false,
      error: 'ECONNREFUSED',
    });
  });

  it('returns a governed redirect as is', async () => {
    const up = await upstream(reply(302, {}, { location: 'http://127.0.0.1:1/elsewhere' }));
    const { url } = await startProxy({ govern: ['127.0.0.1'] });
    const res = await request(`${up.url}/r`, { dispatcher: viaProxy(url), method: 'POST', body: '{}' });
    await res.body.dump();
    expect(res.statusCode).toBe(302);
    expect(res.headers['location']).toBe('http://127.0.0.1:1/elsewhere');
    expect(up.requests).toHaveLength(1);
  });

  it('survives a client that disconnects mid-body on a governed route', async () => {
    const up = await upstream(echo());
    const { port, url, gate } = await startProxy({ govern: ['127.0.0.1'] });
    const client = await rawConnect(port);
    client.write(
      `POST ${up.url}/partial HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n${'z'.repeat(100)}`,
    );
    await new Promise((r) => setTimeout(r, 50));
    client.socket.destroy();
    await new Promise((r) => setTimeout(r, 50));
    expect(gate.handled).toHaveLength(0);
    expect(up.requests).toHaveLength(0);
    const res = await request(`${up.url}/after`, { dispatcher: viaProxy(url), method: 'POST', body: 'ok' });
    expect(await res.body.text()).toBe('ok');
  });

  it('answers HEAD with the upstream length and no body', async () => {
    const up = await upstream(reply(200, { some: 'json' }));
    const { port } = await startProxy({ govern: ['127.0.0.1'] });
    const client = await rawConnect(port);
    client.write(`HEAD ${up.url}/h HTTP/1.1\r\nHost: x\r\n\r\nGET ${up.url}/g HTTP/1.1\r\nHost: x\r\n\r\n`);
    await client.until((t) => t.split('HTTP/1.1 200').length === 3 && t.endsWith('}'));
    const [headPart] = client.text.split('\r\n\r\n');
    expect(headPart).toMatch(/content-length: 15/i);
    expect(client.text.split('{"some":"json"}')).toHaveLength(2);
  });
});
