/**
 * The fields of a `multipart/form-data` body (RFC 7578), read strictly. Rails (Rack), Laravel
 * (PHP), Django and Express (multer) all read a multipart body's fields as parameters: a
 * `title` part is `params[:title]`, and a `_method` part overrides the method. The gate reads them
 * too, so a key path over `$.body` and a method override find in a multipart body what they find
 * in a form.
 *
 * Strict, because parsers disagree at the edges (quoted-pair escapes in names, `name*=`, a part
 * without a name, encodings, a missing close delimiter): anything outside the plain grammar is
 * refused as unreadable (415) rather than read one way while a destination reads it another.
 * File parts are kept as `{ filename }` objects, never as text: their bytes are not arguments.
 */

/** The parsed fields (a repeated name becomes an array, in order), or why the body was refused. */
export type MultipartFields =
  | { readonly ok: true; readonly fields: Record<string, unknown> }
  | { readonly ok: false; readonly problem: string };

const CRLF = '\r\n';
const TOKEN_BOUNDARY = /^[0-9A-Za-z'()+_,\-./:=? ]{1,70}$/;
const PLAIN_NAME = /^[^"\\%\r\n]*$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The `boundary` parameter of a multipart Content-Type, or null. */
export function multipartBoundary(contentType: string): string | null {
  const m = /;\s*boundary=(?:"([^"]*)"|([^;\s]+))/i.exec(contentType);
  const boundary = m?.[1] ?? m?.[2] ?? null;
  return boundary !== null && TOKEN_BOUNDARY.test(boundary) && !boundary.endsWith(' ') ? boundary : null;
}

/**
 * Reads the fields of `body`. `maxFields` bounds the parts (the same node budget as a JSON body).
 */
export function multipartFields(body: Uint8Array, contentType: string, maxFields: number): MultipartFields {
  const boundary = multipartBoundary(contentType);
  if (boundary === null) return refused('no usable boundary parameter');
  // latin1 keeps one character per byte, so offsets found in the text are byte offsets.
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('latin1');
  const delimiter = `--${boundary}`;
  if (!text.startsWith(delimiter)) return refused('the body does not start with its boundary');
  const fields: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  let count = 0;
  let at = delimiter.length;
  for (;;) {
    if (text.startsWith('--', at)) {
      // The close delimiter; only line breaks (an epilogue is ignored by every parser) may follow.
      return { ok: true, fields };
    }
    if (!text.startsWith(CRLF, at)) return refused('a boundary line is not followed by a line break');
    const headersEnd = text.indexOf(CRLF + CRLF, at + 2);
    if (headersEnd === -1) return refused('a part has no end of headers');
    const headers = partHeaders(text.slice(at + 2, headersEnd));
    if (typeof headers === 'string') return refused(headers);
    const next = text.indexOf(`${CRLF}${delimiter}`, headersEnd + 4);
    if (next === -1) return refused('the body has no close delimiter');
    if (++count > maxFields) return refused(`more than ${maxFields} parts`);
    const raw = text.slice(headersEnd + 4, next);
    let value: unknown;
    if (headers.filename !== null) {
      value = { filename: headers.filename };
    } else {
      try {
        value = utf8.decode(Buffer.from(raw, 'latin1'));
      } catch {
        return refused(`part ${JSON.stringify(headers.name)} is not UTF-8`);
      }
    }
    add(fields, headers.name, value);
    at = next + 2 + delimiter.length;
  }
}

interface PartHeaders {
  readonly name: string;
  readonly filename: string | null;
}

/** The name (and filename) of a part, or why its headers are refused. */
function partHeaders(block: string): PartHeaders | string {
  let disposition: string | null = null;
  for (const line of block.split(CRLF)) {
    const colon = line.indexOf(':');
    if (colon <= 0) return 'a part header line has no name';
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'content-disposition') {
      if (disposition !== null) return 'a part has two Content-Disposition headers';
      disposition = value;
    } else if (name === 'content-transfer-encoding') {
      if (!/^(7bit|8bit|binary)$/i.test(value)) return `a part is encoded (${value})`;
    } else if (name === 'content-type') {
      const charset = /;\s*charset="?([^";\s]+)/i.exec(value)?.[1]?.toLowerCase();
      if (charset !== undefined && charset !== 'utf-8' && charset !== 'us-ascii')
        return `a part is in ${charset}`;
    }
  }
  if (disposition === null) return 'a part has no Content-Disposition';
  const params = dispositionParams(disposition);
  if (typeof params === 'string') return params;
  const name = params.get('name');
  if (name === undefined) return 'a part has no name';
  return { name, filename: params.get('filename') ?? null };
}

/** `form-data; name="x"; filename="y"`: plain quoted values only, each parameter once. */
function dispositionParams(value: string): Map<string, string> | string {
  const parts = value.split(';').map((p) => p.trim());
  if (parts[0]?.toLowerCase() !== 'form-data') return 'a part is not form-data';
  const params = new Map<string, string>();
  for (const p of parts.slice(1)) {
    if (p === '') continue;
    const m = /^([A-Za-z*]+)="([^"]*)"$/.exec(p) ?? /^([A-Za-z*]+)=([^"\s]+)$/.exec(p);
    if (m === null) return 'a Content-Disposition parameter is not a plain name="value"';
    const key = m[1]!.toLowerCase();
    if (key.endsWith('*')) return `a Content-Disposition parameter is encoded (${key})`;
    if (params.has(key)) return `a Content-Disposition parameter is given twice (${key})`;
    const text = m[2]!;
    // Escapes (`\"`, `%22`) are read differently by different parsers: refuse rather than guess.
    if (!PLAIN_NAME.test(text)) return `a part's ${key} holds an escape`;
    let decoded: string;
    try {
      decoded = utf8.decode(Buffer.from(text, 'latin1'));
    } catch {
      return `a part's ${key} is not UTF-8`;
    }
    params.set(key, decoded);
  }
  return params;
}

function add(fields: Record<string, unknown>, name: string, value: unknown): void {
  const prev = Object.hasOwn(fields, name) ? fields[name] : undefined;
  const set = (v: unknown): void => {
    Object.defineProperty(fields, name, { value: v, enumerable: true, writable: true, configurable: true });
  };
  if (prev === undefined) set(value);
  else if (Array.isArray(prev) && Object.hasOwn(fields, name)) prev.push(value);
  else set([prev, value]);
}

function refused(problem: string): MultipartFields {
  return { ok: false, problem };
}
