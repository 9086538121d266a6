/**
 * The tools the differential suite attacks: every tool of a policy folder, re-aimed at one oracle.
 * Each tool's hosts become `127.0.0.1:<oracle port>` (the oracle stands in for its destination);
 * everything else of the tool (method, path, body conditions, key, outcome) stays as written.
 * Tools whose method and path collide once re-aimed (the same route on two hosts) keep the first.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseDocument } from 'yaml';
import { type PolicySet, parsePolicyFiles, type Tool } from '../../src/policy/index.js';
import type { OracleRoute } from './oracle-process.js';

export interface PolicyFolder {
  readonly name: string;
  readonly files: readonly { readonly file: string; readonly text: string }[];
}

export function policyFolder(name: string, dir: string, only?: readonly string[]): PolicyFolder {
  const files = readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f) && (only === undefined || only.includes(f)))
    .sort()
    .map((f) => ({ file: join(dir, f), text: readFileSync(join(dir, f), 'utf8') }));
  return { name, files };
}

/** An endpoint the oracle serves: one method and path, and the tools (in selection order) on it. */
export interface Endpoint {
  readonly route: OracleRoute;
  readonly tools: readonly Tool[];
}

export interface AimedSet {
  readonly policies: PolicySet;
  readonly endpoints: ReadonlyMap<string, Endpoint>;
}

const endpointName = (method: string, path: string): string => `${method} ${path}`;

/** The routes an oracle must serve for `folder` (what `aim` will govern), before its port is known. */
export function oracleRoutes(folder: PolicyFolder): OracleRoute[] {
  return [...aim(folder, 1).endpoints.values()].map((e) => e.route);
}

/** `folder` with every tool's hosts replaced by `127.0.0.1:port`. */
export function aim(folder: PolicyFolder, port: number): AimedSet {
  const seen = new Set<string>();
  const texts = folder.files.map(({ file, text }) => {
    const doc = parseDocument(text);
    const tools = doc.get('tools') as { items?: unknown[] } | undefined;
    const kept: unknown[] = [];
    for (const item of tools?.items ?? []) {
      const tool = item as { getIn(path: unknown[]): unknown; setIn(path: unknown[], v: unknown): void };
      const method = String(tool.getIn(['match', 'method']) ?? '').toUpperCase();
      const path = String(tool.getIn(['match', 'path']) ?? '');
      const body = JSON.stringify(tool.getIn(['match', 'body']) ?? null);
      const id = `${method} ${path} ${body}`;
      if (seen.has(id)) continue;
      seen.add(id);
      tool.setIn(['match', 'hosts'], doc.createNode([`127.0.0.1:${port}`], { flow: true }));
      kept.push(item);
    }
    if (tools?.items !== undefined) tools.items = kept;
    // Examples name their tools' real hosts; they are `policies test`'s business, not this suite's.
    doc.delete('examples');
    return { file, text: doc.toString() };
  });
  const policies = parsePolicyFiles(texts);
  const endpoints = new Map<string, Endpoint>();
  for (const tool of policies.tools) {
    const match = tool.match as unknown as { method: string; path: { text: string } };
    const name = endpointName(match.method, match.path.text);
    const bodyFields = topLevelBodyFields(tool);
    const prev = endpoints.get(name);
    const fields = [...new Set([...(prev?.route.body_fields ?? []), ...bodyFields])];
    endpoints.set(name, {
      route: { name, method: match.method, path: match.path.text, body_fields: fields },
      tools: [...(prev?.tools ?? []), tool],
    });
  }
  return { policies, endpoints };
}

/** The first member of every `$.body.NAME…` path the tool reads (key, body conditions, reconcile). */
function topLevelBodyFields(tool: Tool): string[] {
  const expressions = [
    ...(tool.dedupe?.key ?? []).map((p) => p.expression),
    ...((
      tool.match as unknown as { bodyConditions?: { path: { expression: string } }[] }
    ).bodyConditions?.map((c) => `$.body${c.path.expression.slice(1)}`) ?? []),
  ];
  const out: string[] = [];
  for (const e of expressions) {
    const m = /^\$\.body\.([A-Za-z_][\w]*)/.exec(e) ?? /^\$\.body\['([^']+)'\]/.exec(e);
    if (m !== null) out.push(m[1]!);
  }
  return out;
}
