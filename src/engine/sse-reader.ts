/** Whether a Content-Type (its first value) says `text/event-stream`. */
export function isEventStream(contentType: string | undefined): boolean {
  return contentType?.toLowerCase().startsWith('text/event-stream') === true;
}

/**
 * An incremental `text/event-stream` reader (WHATWG HTML §9.2 "Server-sent events", parsing an
 * event stream): fed text as it arrives, it returns the data of each event completed by a blank
 * line. An event still open when the stream ends is never dispatched (the same section), so a
 * response cut off mid-event is not taken for a response. Memory is bounded: an event whose data
 * grows past `maxEventBytes` is dropped whole (`oversized` counts them), and so is a line that
 * long, so a stream without line breaks cannot grow the buffer without end.
 */

export class SseReader {
  readonly #maxEventBytes: number;
  #line = '';
  #data: string[] = [];
  #dataBytes = 0;
  #dropping = false;
  #lastWasCr = false;
  oversized = 0;

  constructor(maxEventBytes: number) {
    this.#maxEventBytes = maxEventBytes;
  }

  /** The data of every event `text` completes, in order. */
  feed(text: string): string[] {
    const out: string[] = [];
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 0x0a && c !== 0x0d) continue;
      // CRLF is one line break: the LF right after a CR ends nothing.
      const crlf = c === 0x0a && this.#lastWasCr && i === start && this.#line === '';
      this.#lastWasCr = c === 0x0d;
      if (crlf) {
        start = i + 1;
        continue;
      }
      this.#append(text.slice(start, i));
      this.#endLine(out);
      start = i + 1;
    }
    if (start < text.length) {
      this.#lastWasCr = false;
      this.#append(text.slice(start));
    }
    return out;
  }

  #append(part: string): void {
    if (this.#line.length + part.length > this.#maxEventBytes) {
      this.#line = '';
      this.#startDropping();
      return;
    }
    this.#line += part;
  }

  #startDropping(): void {
    if (!this.#dropping) this.oversized++;
    this.#dropping = true;
    this.#data = [];
    this.#dataBytes = 0;
  }

  #endLine(out: string[]): void {
    const line = this.#line;
    this.#line = '';
    if (line === '') {
      if (!this.#dropping && this.#data.length > 0) out.push(this.#data.join('\n'));
      this.#data = [];
      this.#dataBytes = 0;
      this.#dropping = false;
      return;
    }
    if (this.#dropping || line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    if (field !== 'data') return;
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    this.#dataBytes += value.length + 1;
    if (this.#dataBytes > this.#maxEventBytes) {
      this.#startDropping();
      return;
    }
    this.#data.push(value);
  }
}
