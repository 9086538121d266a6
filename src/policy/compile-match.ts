import { type HostPattern, parseHostPattern } from './host-pattern.js';
import { parseJsonPath } from './json-path.js';
import { PathTemplate } from './path-template.js';
import type { PolicyReader, Slot } from './policy-reader.js';
import { readJsonPath, readMethod } from './policy-values.js';
import { type BodyCondition, RouteMatcher } from './route-matcher.js';

export const MATCH_FIELDS = ['hosts', 'method', 'path', 'body', 'json_types', 'graphql'] as const;
export const GRAPHQL_FIELDS = ['mutation'] as const;

/** A GraphQL Name (GraphQL spec §2.1.9). */
const GRAPHQL_NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

export interface CompiledMatch {
  /** `null` when any part of the block was invalid (the issues are already recorded). */
  readonly matcher: RouteMatcher | null;
  /** Captures of the path template, or `null` if the template could not be read. */
  readonly captures: readonly string[] | null;
}

/** Compiles a tool's `match` block. */
export function compileMatch(r: PolicyReader, slot: Slot): CompiledMatch {
  const f = r.fields(slot, MATCH_FIELDS, ['hosts', 'method', 'path']);
  if (f === null) return { matcher: null, captures: null };
  const hosts = readHosts(r, f.get('hosts'));
  const methodSlot = f.get('method');
  const method = methodSlot === undefined ? null : readMethod(r, methodSlot);
  const template = readTemplate(r, f.get('path'));
  const bodySlot = f.get('body');
  const body = bodySlot === undefined ? [] : readBodyConditions(r, bodySlot);
  const typesSlot = f.get('json_types');
  const jsonTypes = typesSlot === undefined ? [] : readJsonTypes(r, typesSlot);
  const graphqlSlot = f.get('graphql');
  const graphql = graphqlSlot === undefined ? undefined : readGraphql(r, graphqlSlot);
  const captures = template?.captures ?? null;
  if (
    hosts === null ||
    method === null ||
    template === null ||
    body === null ||
    jsonTypes === null ||
    graphql === null
  )
    return { matcher: null, captures };
  return {
    matcher: new RouteMatcher(hosts, method, template, body, jsonTypes, graphql ?? null),
    captures,
  };
}

/**
 * `match.graphql`: the root mutation field this tool is, on an endpoint that carries every
 * mutation (`POST /graphql`). The document is read as servers read it (`graphql-request.ts`).
 */
function readGraphql(r: PolicyReader, slot: Slot): string | null {
  const f = r.fields(slot, GRAPHQL_FIELDS, ['mutation']);
  const mutation = f?.get('mutation');
  if (mutation === undefined) return null;
  const name = r.string(mutation);
  if (name === null) return null;
  if (!GRAPHQL_NAME.test(name)) {
    r.issue(mutation.at, mutation.field, `${JSON.stringify(name)} is not a GraphQL field name`);
    return null;
  }
  return name;
}

const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/;

/**
 * `json_types`: media types (besides `application/json`) the destination declares it reads as
 * JSON, such as Kubernetes' `application/merge-patch+json`. Lower case, no parameters.
 */
function readJsonTypes(r: PolicyReader, slot: Slot): string[] | null {
  const items = r.items(slot);
  if (items === null) return null;
  const out: string[] = [];
  let ok = true;
  for (const item of items) {
    const text = r.string(item);
    if (text === null) {
      ok = false;
      continue;
    }
    if (!MEDIA_TYPE.test(text)) {
      r.issue(
        item.at,
        item.field,
        `must be a lower-case media type without parameters, e.g. application/merge-patch+json`,
      );
      ok = false;
      continue;
    }
    out.push(text);
  }
  return ok ? out : null;
}

function readHosts(r: PolicyReader, slot: Slot | undefined): HostPattern[] | null {
  if (slot === undefined) return null;
  const items = r.items(slot);
  if (items === null) return null;
  if (items.length === 0) {
    r.issue(slot.at, slot.field, 'must list at least one host');
    return null;
  }
  let ok = true;
  const hosts: HostPattern[] = [];
  for (const item of items) {
    const text = r.string(item);
    if (text === null) {
      ok = false;
      continue;
    }
    try {
      hosts.push(parseHostPattern(text));
    } catch (err) {
      r.issue(item.at, item.field, (err as Error).message);
      ok = false;
    }
  }
  return ok ? hosts : null;
}

function readTemplate(r: PolicyReader, slot: Slot | undefined): PathTemplate | null {
  if (slot === undefined) return null;
  const text = r.string(slot);
  if (text === null) return null;
  try {
    return new PathTemplate(text);
  } catch (err) {
    r.issue(slot.at, slot.field, `path template ${JSON.stringify(text)} ${(err as Error).message}`);
    return null;
  }
}

/** `match.body`: JSONPath over the parsed JSON body → scalar that must be found there. */
function readBodyConditions(r: PolicyReader, slot: Slot): BodyCondition[] | null {
  const entries = r.entries(slot);
  if (entries === null) return null;
  if (entries.size === 0) {
    r.issue(slot.at, slot.field, 'must hold at least one condition; omit body to match any body');
    return null;
  }
  let ok = true;
  const seen = new Set<string>();
  const conditions: BodyCondition[] = [];
  for (const [key, value] of entries) {
    const path = readJsonPath(r, { node: value.keyAt, at: value.keyAt, field: value.field });
    const scalar = r.scalar(value);
    if (path === null || scalar === undefined) {
      ok = false;
      continue;
    }
    const canonical = parseJsonPath(path.expression).canonical;
    if (seen.has(canonical)) {
      r.issue(value.keyAt, value.field, `condition on ${key} is listed twice (as ${canonical})`);
      ok = false;
      continue;
    }
    seen.add(canonical);
    conditions.push({ path, canonical, value: scalar });
  }
  return ok ? conditions : null;
}
