/**
 * The incremental event-stream reader the gate reads MCP answers with (WHATWG HTML §9.2): events
 * come out whole however the bytes are split, an event the stream ended inside never comes out,
 * and an event past the cap is dropped whole instead of growing memory.
 */
import { describe, expect, it } from 'vitest';
import { SseReader } from '../../../src/engine/sse-reader.js';

/** Feeds `text` split at every position in turn; every split must give the same events. */
function everySplit(text: string, max = 1024): string[][] {
  const out: string[][] = [];
  for (let i = 0; i <= text.length; i++) {
    const r = new SseReader(max);
    out.push([...r.feed(text.slice(0, i)), ...r.feed(text.slice(i))]);
  }
  return out;
}

describe('SseReader', () => {
  it('gives each event once its blank line comes, however the text is split (LF, CRLF, CR)', () => {
    for (const nl of ['\n', '\r\n', '\r']) {
      const text = [
        ': comment',
        'event: message',
        'id: 1',
        'data: {"a":1}',
        '',
        'data: two',
        'data: lines',
        '',
        '',
      ].join(nl);
      for (const events of everySplit(text)) expect(events).toEqual(['{"a":1}', 'two\nlines']);
    }
  });

  it('keeps an event the stream ends inside, and a data-less event, from coming out', () => {
    const r = new SseReader(1024);
    expect(r.feed('data: done\n\nevent: ping\n\ndata: cut')).toEqual(['done']);
  });

  it('reads a field without a space after the colon, and ignores other fields', () => {
    const r = new SseReader(1024);
    expect(r.feed('data:x\nretry: 5\nfoo: bar\ndata\n\n')).toEqual(['x\n']);
  });

  it('drops an event whose data (or one line) passes the cap, counts it, and reads the next', () => {
    const r = new SseReader(16);
    expect(r.feed(`data: ${'x'.repeat(10)}\ndata: ${'y'.repeat(10)}\n\ndata: ok\n\n`)).toEqual(['ok']);
    expect(r.oversized).toBe(1);
    const long = new SseReader(16);
    expect(long.feed(`data: ${'z'.repeat(40)}`)).toEqual([]);
    expect(long.feed('\n\ndata: next\n\n')).toEqual(['next']);
    expect(long.oversized).toBe(1);
  });
});
