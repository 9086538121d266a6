/**
 * Spellings of one governed call. For a tool, `seed` builds the plain request (its method and path,
 * a JSON body holding its body conditions and unique key values); `variants` respells it the ways
 * a server framework may read differently from the gate: method overrides wherever frameworks
 * read them, path spellings, content-type labels that disagree with the bytes, duplicate and
 * case-folded member names (Unicode folding included), scalar types, the query beside the body,
 * and the host by name instead of address. Deterministic for a seed; each variant is bytes.
 */
import type { Tool } from '../../src/policy/index.js';
import type { RawRequest } from './raw-http.js';

export interface Variant {
  /** Stable name of the spelling, e.g. `override-header`. */
  readonly kind: string;
  readonly tool: Tool;
  readonly request: RawRequest;
  /** `name`: addressed as `localhost` instead of the tool's `127.0.0.1`. */
  readonly authority: 'address' | 'name';
}

/** A simple JSONPath over the argument document: `$.body.a.b`, `$.path.x`, `$.query.y`. */
export function simplePath(expression: string): readonly string[] | null {
  const m = /^\$((?:\.[A-Za-z_][\w]*|\['[^'\\]+'\])+)$/.exec(expression);
  if (m === null) return null;
  return [...m[1]!.matchAll(/\.([A-Za-z_][\w]*)|\['([^'\\]+)'\]/g)].map((x) => x[1] ?? x[2]!);
}

/** The seed's arguments: captures, query and body, with `tag` making every key value unique. */
export interface SeedArgs {
  readonly path: Record<string, string>;
  readonly query: Record<string, string>;
  readonly body: Record<string, unknown>;
  /** Body paths (member names from the body root) of the key's string values, in key order. */
  readonly keyBodyPaths: readonly (readonly string[])[];
}

/** `null` when the tool reads its key in a way this generator does not spell (filters, indexes). */
export function seedArgs(tool: Tool, tag: string, numeric: boolean): SeedArgs | null {
  const match = tool.match as unknown as {
    method: string;
    path: { captures: readonly string[] };
    bodyConditions: readonly { path: { expression: string }; value: unknown }[];
  };
  const path: Record<string, string> = {};
  for (const c of match.path.captures) path[c] = `${c}-${tag}`;
  const query: Record<string, string> = {};
  const body: Record<string, unknown> = {};
  for (const c of match.bodyConditions ?? []) {
    const steps = simplePath(c.path.expression);
    if (steps === null) return null;
    setIn(body, steps, c.value);
  }
  const keyBodyPaths: string[][] = [];
  for (const [i, p] of (tool.dedupe?.key ?? []).entries()) {
    const steps = simplePath(p.expression);
    if (steps === null) return null;
    const [root, ...rest] = steps;
    const value = numeric ? `${40_000 + i}${tagDigits(tag)}` : `v${i}-${tag}`;
    if (root === 'path' && rest.length === 1) path[rest[0]!] = numeric ? value : `${rest[0]}-${tag}`;
    else if (root === 'query' && rest.length === 1) query[rest[0]!] = value;
    else if (root === 'body' && rest.length > 0) {
      setIn(body, rest, value);
      keyBodyPaths.push(rest);
    } else return null;
  }
  return { path, query, body, keyBodyPaths };
}

function tagDigits(tag: string): string {
  return String(Number.parseInt(tag, 36) % 1_000_000);
}

function setIn(target: Record<string, unknown>, steps: readonly string[], value: unknown): void {
  let at = target;
  for (const step of steps.slice(0, -1)) {
    const next = at[step];
    if (next === null || typeof next !== 'object') at[step] = {};
    at = at[step] as Record<string, unknown>;
  }
  at[steps[steps.length - 1]!] = value;
}

/** The tool's path template with `args.path` filled in (percent-encoded). */
export function fillPath(tool: Tool, captures: Readonly<Record<string, unknown>>): string {
  const template = (tool.match as unknown as { path: { text: string } }).path.text;
  return template.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) =>
    encodeURIComponent(String(captures[name] ?? '')),
  );
}

function queryString(query: Readonly<Record<string, unknown>>): string {
  const entries = Object.entries(query).filter(([, v]) => v !== undefined && v !== null);
  if (entries.length === 0) return '';
  const pairs = entries.map(([k, v]): [string, string] => [k, typeof v === 'string' ? v : JSON.stringify(v)]);
  return `?${new URLSearchParams(pairs).toString()}`;
}

const JSON_TYPE: readonly [string, string] = ['Content-Type', 'application/json'];

/** The canonical request for `tool` with `args` (JSON body, the tool's own method and spelling). */
export function canonicalRequest(
  tool: Tool,
  args: { path: Record<string, unknown>; query: Record<string, unknown>; body: unknown },
): RawRequest {
  const method = (tool.match as unknown as { method: string }).method;
  const hasBody = args.body !== undefined && args.body !== null;
  return {
    method,
    target: `${fillPath(tool, args.path)}${queryString(args.query)}`,
    headers: hasBody ? [JSON_TYPE] : [],
    body: hasBody ? Buffer.from(JSON.stringify(args.body)) : Buffer.alloc(0),
  };
}

/** Every variant of `tool` under `tag` (`tag` keeps each variant's key values its own). */
export function variants(tool: Tool, tagOf: (kind: string) => string): Variant[] {
  const out: Variant[] = [];
  const method = (tool.match as unknown as { method: string }).method;
  const add = (
    kind: string,
    build: (seed: SeedArgs, plain: RawRequest) => RawRequest | null,
    numeric = false,
  ) => {
    const seed = seedArgs(tool, tagOf(kind), numeric);
    if (seed === null) return;
    const plain = canonicalRequest(tool, seed);
    const request = build(seed, plain);
    if (request !== null) out.push({ kind, tool, request, authority: 'address' });
  };
  const json = (body: unknown): Buffer => Buffer.from(JSON.stringify(body));
  const withType = (r: RawRequest, type: string | null): RawRequest => ({
    ...r,
    headers: [
      ...r.headers.filter(([n]) => n.toLowerCase() !== 'content-type'),
      ...(type === null ? [] : [['Content-Type', type] as const]),
    ],
  });
  const flat = (body: Record<string, unknown>): [string, string][] | null => {
    const fields: [string, string][] = [];
    for (const [k, v] of Object.entries(body)) {
      if (v !== null && typeof v === 'object') return null;
      fields.push([k, String(v)]);
    }
    return fields;
  };

  add('plain', (_s, plain) => plain);
  if (method === 'POST' || method === 'PUT' || method === 'PATCH' || method === 'DELETE') {
    add('json-as-form', (_s, p) => withType(p, 'application/x-www-form-urlencoded'));
    add('json-as-text', (_s, p) => withType(p, 'text/plain'));
    add('json-untyped', (_s, p) => withType(p, null));
    add('json-vnd', (_s, p) => withType(p, 'application/vnd.api+json'));
    add('json-upper-type', (_s, p) => withType(p, 'Application/JSON; charset=UTF-8'));
    add('form', (s, p) => {
      const fields = flat(s.body);
      if (fields === null) return null;
      return {
        ...withType(p, 'application/x-www-form-urlencoded'),
        body: Buffer.from(new URLSearchParams(fields).toString()),
      };
    });
    add('multipart', (s, p) => {
      const fields = flat(s.body);
      if (fields === null) return null;
      const boundary = 'eg-boundary-7d1';
      const parts = fields.map(
        ([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`,
      );
      return {
        ...withType(p, `multipart/form-data; boundary=${boundary}`),
        body: Buffer.from(`${parts.join('')}--${boundary}--\r\n`),
      };
    });
    // The body as a form with qs-style bracket names (`fields[summary]=…`): Rails, Laravel and
    // Express nest them into the JSON body's shape, Django, Flask and Go keep literal names.
    add('nested-form', (s, p) => {
      const fields = bracketFields(s.body);
      if (fields === null || !fields.some(([k]) => k.includes('['))) return null;
      return {
        ...withType(p, 'application/x-www-form-urlencoded'),
        body: Buffer.from(new URLSearchParams(fields).toString()),
      };
    });
    // A flat key member sent as `name[x]=value`: an object to the nesting frameworks.
    add('bracket-member', (s, p) => {
      const fields = flat(s.body);
      const steps = s.keyBodyPaths.find((x) => x.length === 1);
      if (fields === null || steps === undefined) return null;
      const name = steps[0]!;
      const renamed = fields.map(([k, v]): [string, string] => (k === name ? [`${k}[x]`, v] : [k, v]));
      return {
        ...withType(p, 'application/x-www-form-urlencoded'),
        body: Buffer.from(new URLSearchParams(renamed).toString()),
      };
    });
    // A numeric key value sent as a JSON number: the base (built from the oracle's reading) sends
    // it as a string; a destination that casts reads both as one value.
    add(
      'scalar-number',
      (s, p) => {
        if (s.keyBodyPaths.length === 0) return null;
        const body = structuredClone(s.body);
        for (const steps of s.keyBodyPaths) mapIn(body, steps, (v) => Number(v));
        return { ...p, body: json(body) };
      },
      true,
    );
    add(
      'scalar-decimal',
      (s, p) => {
        if (s.keyBodyPaths.length === 0) return null;
        return { ...p, body: Buffer.from(JSON.stringify(s.body).replace(/"(\d+)"/g, '$1.0')) };
      },
      true,
    );
    // Member names: a duplicate, an ASCII case variant, and Unicode folds (ſ for s, K for k).
    add('duplicate-member', (s, p) => {
      const [steps] = s.keyBodyPaths;
      if (steps === undefined || steps.length !== 1) return null;
      const name = steps[0]!;
      const text = JSON.stringify(s.body);
      return { ...p, body: Buffer.from(`${text.slice(0, -1)},${JSON.stringify(name)}:"other-${name}"}`) };
    });
    add('case-member-only', (s, p) => renameKeyMember(s, p, (n) => n.toUpperCase(), false));
    add('case-member-after', (s, p) => renameKeyMember(s, p, (n) => n.toUpperCase(), true));
    add('fold-member-after', (s, p) => renameKeyMember(s, p, unicodeFoldSpelling, true));
    add('fold-member-only', (s, p) => renameKeyMember(s, p, unicodeFoldSpelling, false));
    add('query-beside-body', (s, p) => {
      const [steps] = s.keyBodyPaths;
      if (steps === undefined || steps.length !== 1) return null;
      const sep = p.target.includes('?') ? '&' : '?';
      return { ...p, target: `${p.target}${sep}${encodeURIComponent(steps[0]!)}=from-query` };
    });
  }
  // Method overrides: sent as POST, naming the tool's method where frameworks read it.
  if (method !== 'POST' && method !== 'GET') {
    const post = (r: RawRequest): RawRequest => ({ ...r, method: 'POST' });
    add('override-header', (_s, p) => ({
      ...post(p),
      headers: [...p.headers, ['X-HTTP-Method-Override', method]],
    }));
    add('override-query', (_s, p) => ({
      ...post(p),
      target: `${p.target}${p.target.includes('?') ? '&' : '?'}_method=${method}`,
    }));
    add('override-form', (s, p) => {
      const fields = flat(s.body) ?? [];
      return {
        ...post(withType(p, 'application/x-www-form-urlencoded')),
        body: Buffer.from(new URLSearchParams([...fields, ['_method', method]]).toString()),
      };
    });
    add('override-multipart', (s, p) => {
      const fields = [...(flat(s.body) ?? []), ['_method', method] as [string, string]];
      const boundary = 'eg-boundary-9f2';
      const parts = fields.map(
        ([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`,
      );
      return {
        ...post(withType(p, `multipart/form-data; boundary=${boundary}`)),
        body: Buffer.from(`${parts.join('')}--${boundary}--\r\n`),
      };
    });
    add('override-json', (s, p) => ({
      ...post(withType(p, 'application/json')),
      body: json({ ...s.body, _method: method }),
    }));
  }
  // Path spellings.
  const respell = (kind: string, f: (path: string) => string | null): void =>
    add(kind, (_s, p) => {
      const q = p.target.indexOf('?');
      const path = q === -1 ? p.target : p.target.slice(0, q);
      const next = f(path);
      return next === null || next === path
        ? null
        : { ...p, target: next + (q === -1 ? '' : p.target.slice(q)) };
    });
  respell('suffix-json', (path) => (path === '/' ? null : `${path.replace(/\/$/, '')}.json`));
  respell('trailing-slash', (path) => (path.endsWith('/') ? path.slice(0, -1) : `${path}/`));
  respell('upper-case', (path) => path.replace(/\/([a-z])/, (_m, c: string) => `/${c.toUpperCase()}`));
  respell('encoded-letter', (path) =>
    path.replace(/\/([a-z])/, (_m, c: string) => `/%${c.charCodeAt(0).toString(16)}`),
  );
  respell('dot-segment', (path) => `/x/..${path}`);
  respell('double-slash', (path) => `/${path}`);
  respell('matrix-param', (path) => path.replace(/^(\/[^/]+)/, '$1;v=1'));
  // The tool names its host by address; the agent by a name that resolves to it.
  add('host-by-name', (_s, p) => p);
  const last = out[out.length - 1];
  if (last?.kind === 'host-by-name') out[out.length - 1] = { ...last, authority: 'name' };
  return out;
}

function mapIn(target: Record<string, unknown>, steps: readonly string[], f: (v: unknown) => unknown): void {
  let at = target;
  for (const step of steps.slice(0, -1)) at = at[step] as Record<string, unknown>;
  const lastStep = steps[steps.length - 1]!;
  at[lastStep] = f(at[lastStep]);
}

/** `s` → `ſ`, `k` → `K` (KELVIN SIGN), which Go's encoding/json folds to the ASCII letter. */
function unicodeFoldSpelling(name: string): string {
  const next = name.replace('s', '\u017f');
  return next !== name ? next : name.replace('k', '\u212a');
}

/**
 * The first top-level key member renamed by `rename`: alone (`after` false), or after the member
 * spelt as the tool does with another value (`after` true: a binder whose last match wins takes it).
 */
function renameKeyMember(
  s: SeedArgs,
  p: RawRequest,
  rename: (name: string) => string,
  after: boolean,
): RawRequest | null {
  const steps = s.keyBodyPaths.find((x) => x.length === 1);
  if (steps === undefined) return null;
  const name = steps[0]!;
  const other = rename(name);
  if (other === name) return null;
  const value = s.body[name];
  const rest = Object.fromEntries(Object.entries(s.body).filter(([k]) => k !== name));
  const text = after
    ? `${JSON.stringify({ ...rest, [name]: `decoy-${String(value)}` }).slice(0, -1)},${JSON.stringify(other)}:${JSON.stringify(value)}}`
    : JSON.stringify({ ...rest, [other]: value });
  return { ...p, body: Buffer.from(text) };
}

/** `{a: {b: 1}, c: [2]}` → `[["a[b]", "1"], ["c[]", "2"]]` (qs's bracket syntax); null for nulls. */
function bracketFields(body: Record<string, unknown>, prefix = ''): [string, string][] | null {
  const out: [string, string][] = [];
  for (const [k, v] of Object.entries(body)) {
    const name = prefix === '' ? k : `${prefix}[${k}]`;
    if (v === null) return null;
    if (Array.isArray(v)) {
      for (const item of v) {
        if (item !== null && typeof item === 'object') return null;
        out.push([`${name}[]`, String(item)]);
      }
    } else if (typeof v === 'object') {
      const inner = bracketFields(v as Record<string, unknown>, name);
      if (inner === null) return null;
      out.push(...inner);
    } else out.push([name, String(v)]);
  }
  return out;
}
