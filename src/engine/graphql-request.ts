/**
 * A GraphQL request as servers read it (GraphQL over HTTP): `query`, `variables` and
 * `operationName` from the URL's query string (GET) or from a JSON body (POST; a form body too,
 * as express-graphql reads one), the document parsed with graphql-js and its operation's root
 * fields collected (`graphql-root-fields.ts`). Read only on a route some `match.graphql` tool
 * governs; whatever servers may read two ways is refused, never guessed (`ArgumentRefusal`).
 */
import { GraphQLError, parse } from 'graphql';
import type { Classification } from '../policy/index.js';
import { parseBody, parseQuery } from './argument-document.js';
import { ArgumentRefusal } from './argument-refusal.js';
import { type GraphqlOperation, type GraphqlRootField, graphqlRootFields } from './graphql-root-fields.js';
import type { BodyLimits } from './json-scan.js';
import type { GateRequest } from './types.js';

/** The parameters of a GraphQL request, by their GraphQL-over-HTTP names. */
const PARAMS = ['query', 'variables', 'operationName', 'extensions'] as const;
const FOLDED_PARAMS: ReadonlyMap<string, Param> = new Map(PARAMS.map((p) => [p.toLowerCase(), p]));
const encoder = new TextEncoder();

type Param = (typeof PARAMS)[number];
type Params = Partial<Record<Param, unknown>>;

/**
 * The one root mutation field the request performs, when some candidate is a `match.graphql` tool
 * (else `null`, and nothing is parsed): `null` too for a query, a subscription or no document at
 * all, which no such tool is. A mutation of several root fields is refused when a candidate
 * governs one of them: servers execute them all, one after the other, and the gate keys one call.
 *
 * @throws {ArgumentRefusal} see {@link readGraphqlRequest}.
 */
export function governedMutation(
  request: Pick<GateRequest, 'query' | 'body'>,
  body: unknown,
  candidates: readonly Classification[],
  limits: BodyLimits,
): GraphqlRootField | null {
  if (!candidates.some((c) => (c.tool.match.graphqlMutation ?? null) !== null)) return null;
  const operation = readGraphqlRequest(request, body, limits);
  if (operation === null || operation.type !== 'mutation') return null;
  if (operation.fields.length === 1) return operation.fields[0]!;
  const governed = operation.fields.filter((f) =>
    candidates.some((c) => c.tool.match.graphqlMutation === f.name),
  );
  if (governed.length === 0) return null;
  throw ArgumentRefusal.graphqlAmbiguous(
    `the mutation performs ${operation.fields.length} root fields (${operation.fields.map((f) => f.responseName).join(', ')}), ${governed[0]!.name} among them`,
  );
}

/**
 * The operation the request performs, or `null` when it carries no GraphQL document and nothing
 * that could stand for one (a GET of the endpoint itself, an empty POST): nothing executes then.
 * `body` is the body as `parseBody` read it.
 *
 * @throws {ArgumentRefusal} `graphql_invalid` for what cannot be read, `arguments_ambiguous` for
 *   what may be read two ways.
 */
export function readGraphqlRequest(
  request: Pick<GateRequest, 'query' | 'body'>,
  body: unknown,
  limits: BodyLimits,
): GraphqlOperation | null {
  const fromUrl = urlParams(request.query);
  const fromBody = bodyParams(request.body.byteLength, body);
  let params: Params;
  if (fromBody !== null && Object.keys(fromBody).length > 0) {
    // express-graphql lets each URL parameter win over the body's; others ignore the URL on a POST.
    const both = PARAMS.filter((p) => p in fromUrl);
    if (both.length > 0) {
      throw ArgumentRefusal.graphqlAmbiguous(
        `both the URL and the body carry GraphQL parameters (${both.join(', ')} in the URL), and servers read one or the other`,
      );
    }
    params = fromBody;
  } else {
    params = fromUrl;
  }
  const query = params.query;
  if (query === undefined || query === null) {
    // A persisted query names a document the gate has never seen: it cannot tell what it performs.
    if (params.extensions !== undefined && params.extensions !== null) {
      throw ArgumentRefusal.graphqlInvalid('a persisted query is sent without its document');
    }
    if (fromBody !== null) throw ArgumentRefusal.graphqlInvalid('the body carries no query');
    return null;
  }
  if (typeof query !== 'string') throw ArgumentRefusal.graphqlInvalid('query is not a string');
  let document: ReturnType<typeof parse>;
  try {
    document = parse(query, { noLocation: true, maxTokens: limits.maxNodes });
  } catch (err) {
    if (!(err instanceof GraphQLError)) throw err;
    throw ArgumentRefusal.graphqlInvalid(`the document does not parse: ${err.message}`);
  }
  return graphqlRootFields(document, params.operationName, variablesOf(params.variables, limits));
}

/** The GraphQL parameters of the URL's query string; one given twice is refused. */
function urlParams(raw: string): Params {
  if (raw === '') return {};
  const all = parseQuery(raw);
  const out: Params = {};
  for (const name of Object.keys(all)) {
    const param = FOLDED_PARAMS.get(name.toLowerCase());
    if (param === undefined) continue;
    const value = all[name];
    if (name !== param || Array.isArray(value)) {
      throw ArgumentRefusal.graphqlAmbiguous(
        name !== param
          ? `the URL carries ${name}, which case-insensitive servers read as ${param}`
          : `the URL gives ${param} more than once`,
      );
    }
    out[param] = value;
  }
  return out;
}

/**
 * The GraphQL parameters of a body (`null` when there is none). A JSON or form object is read;
 * anything else is refused: a raw `application/graphql` document, a batch (an array), bytes that
 * are not JSON, all of which some servers execute and the gate cannot read as one operation.
 */
function bodyParams(bytes: number, body: unknown): Params | null {
  if (bytes === 0) return null;
  if (body === undefined) {
    throw ArgumentRefusal.graphqlInvalid('the body is not JSON under Content-Type: application/json');
  }
  if (Array.isArray(body)) {
    throw ArgumentRefusal.graphqlInvalid('the body is a batch of operations: send one per request');
  }
  if (body === null || typeof body !== 'object')
    throw ArgumentRefusal.graphqlInvalid('the body is not a JSON object');
  const out: Params = {};
  for (const [name, value] of Object.entries(body)) {
    const param = FOLDED_PARAMS.get(name.toLowerCase());
    if (param === undefined) continue;
    // Go's encoding/json binds `Query` as `query`; other servers ignore it.
    if (name !== param) {
      throw ArgumentRefusal.graphqlAmbiguous(
        `the body carries ${name}, which case-insensitive servers read as ${param}`,
      );
    }
    out[param] = value;
  }
  return out;
}

/** `variables` as an object: given as one, or as its JSON text (a URL, a form, express-graphql). */
function variablesOf(value: unknown, limits: BodyLimits): Readonly<Record<string, unknown>> {
  if (value === undefined || value === null) return {};
  let parsed: unknown = value;
  if (typeof value === 'string') {
    parsed = value.trim() === '' ? {} : parseBody(encoder.encode(value), 'application/json', limits);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw ArgumentRefusal.graphqlInvalid('variables is not a JSON object');
  }
  return parsed as Record<string, unknown>;
}
