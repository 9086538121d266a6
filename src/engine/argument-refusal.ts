import { EffectgateError, type ErrorCode } from '../errors.js';
import type { BodyLimits } from './json-scan.js';

/** The transport problem a refusal is answered with (status and title: `problem-response.ts`). */
export type ArgumentProblem =
  | 'arguments_ambiguous'
  | 'body_too_complex'
  | 'headers_disagree'
  | 'body_unreadable'
  | 'ambiguous_route'
  | 'graphql_invalid'
  | 'idempotency_key';

const CODES: Readonly<Record<ArgumentProblem, ErrorCode>> = {
  arguments_ambiguous: 'EG_ERR_ARGUMENTS_AMBIGUOUS',
  headers_disagree: 'EG_ERR_ARGUMENTS_AMBIGUOUS',
  body_too_complex: 'EG_ERR_BODY_TOO_COMPLEX',
  body_unreadable: 'EG_ERR_BODY_UNREADABLE',
  ambiguous_route: 'EG_ERR_AMBIGUOUS_ROUTE',
  graphql_invalid: 'EG_ERR_GRAPHQL_INVALID',
  idempotency_key: 'EG_ERR_IDEMPOTENCY_KEY',
};

/**
 * Arguments the gate refuses to read, before any store round trip and with nothing sent: the
 * client's error, answered 422 (ambiguous) or 413 (too complex) by `Gate.handle()`. Every text of
 * these refusals is written here, once.
 */
export class ArgumentRefusal extends EffectgateError {
  readonly problem: ArgumentProblem;
  /** JSONPath (over the argument document) of what was refused, e.g. `$.body.items[2].id`. */
  readonly path: string | null;

  private constructor(problem: ArgumentProblem, path: string | null, detail: string) {
    super(CODES[problem], detail);
    this.name = 'ArgumentRefusal';
    this.problem = problem;
    this.path = path;
  }

  /**
   * A JSON member name given twice in one object (or twice but for letter case, which Go's
   * encoding/json reads as one name): JSON.parse keeps the last, some servers the first.
   */
  static duplicateMember(path: string): ArgumentRefusal {
    return new ArgumentRefusal(
      'arguments_ambiguous',
      path,
      `The JSON body gives the member ${path} more than once (member names that differ only in letter case count as the same name: some servers match them so). Parsers disagree on which one counts (the first or the last), so the gate could key this call on one value while the destination acts on the other. Send each member once. Nothing was sent.`,
    );
  }

  /**
   * A key path that finds its member only when names are compared without letter case
   * (`{"Title": …}` for `$.body.title`): a case-insensitive binder acts on it, the gate would not.
   */
  static foldedMember(keyPath: string, toolId: string): ArgumentRefusal {
    return new ArgumentRefusal(
      'arguments_ambiguous',
      keyPath,
      `The key path ${keyPath} of tool ${toolId} finds its member only if member names are read without letter case, as some servers read them (Go's encoding/json, for one). The gate cannot key a call on an argument it reads differently from the destination. Spell the member as the API does. Nothing was sent.`,
    );
  }

  /** A repeated query parameter or form field that one of the tool's key paths reads. */
  static repeatedParameter(path: string, keyPath: string, toolId: string): ArgumentRefusal {
    const what = path.startsWith('$.query') ? 'query parameter' : 'form field';
    return new ArgumentRefusal(
      'arguments_ambiguous',
      path,
      `The ${what} ${path} is given more than once, and the key path ${keyPath} of tool ${toolId} reads it. Servers disagree on which value counts, so the gate cannot tell which effect this call asks for. Send it once. Nothing was sent.`,
    );
  }

  /**
   * A key path that reads another argument when bracketed names are nested (`fields[summary]=x`
   * is `fields.summary` to Rails, PHP and qs, a literal name to Django, Flask and Go).
   */
  static nestedParameter(keyPath: string, toolId: string): ArgumentRefusal {
    return new ArgumentRefusal(
      'arguments_ambiguous',
      keyPath,
      `The key path ${keyPath} of tool ${toolId} reads another value when bracketed parameter names (name[member]=…) are nested, as Rails, PHP and qs nest them, than when they are read as plain names, as Django, Flask and Go read them. The gate cannot tell which argument the destination acts on. Send the arguments as a JSON body (Content-Type: application/json). Nothing was sent.`,
    );
  }

  /**
   * A name a key path reads that the request also gives in the other source (query and body):
   * Rails lets the query win over the body, Go's FormValue the form body over the query, so the
   * gate could key one value while the destination acts on the other.
   */
  static twoSources(name: string, keyPath: string, toolId: string): ArgumentRefusal {
    return new ArgumentRefusal(
      'arguments_ambiguous',
      keyPath,
      `The request gives ${JSON.stringify(name)} both in the query and in the body, and the key path ${keyPath} of tool ${toolId} reads one of them. Servers disagree on which one counts, so the gate cannot tell which effect this call asks for. Send it in one place. Nothing was sent.`,
    );
  }

  /**
   * An MCP routing header (`Mcp-Method`, `Mcp-Name`, MCP 2026-07-28) that names another method or
   * tool than the JSON-RPC body: an intermediary may route by the header, the server acts on the
   * body (or the reverse), so the gate would classify one call while another is made.
   */
  static headersDisagree(
    header: string,
    headerValue: string,
    path: string,
    bodyValue: unknown,
  ): ArgumentRefusal {
    return new ArgumentRefusal(
      'headers_disagree',
      path,
      `The ${header} header says ${JSON.stringify(headerValue)} but the JSON-RPC body has ${JSON.stringify(bodyValue ?? null)} at ${path}. MCP requires the two to agree; the gate cannot tell which call this is. Send the header the body implies. Nothing was sent.`,
    );
  }

  /** A governed body whose bytes the gate cannot read one way only (`what` says why). */
  static unreadable(what: string): ArgumentRefusal {
    return new ArgumentRefusal(
      'body_unreadable',
      null,
      `The gate cannot read this body one way only (${what}), and servers read such bodies differently. Send a plain application/json body, or a plain form. Nothing was sent.`,
    );
  }

  /** JSON bytes under a label (or none) that some servers do not read as JSON (`body-label.ts`). */
  static labelDisagrees(contentType: string | undefined): ArgumentRefusal {
    const label =
      contentType === undefined ? 'has no Content-Type' : `is labelled ${JSON.stringify(contentType)}`;
    return new ArgumentRefusal(
      'body_unreadable',
      null,
      `The body is JSON but ${label}. Some servers read such a body as JSON, others as a form or not at all, so the gate cannot tell which arguments this call carries. Send it with Content-Type: application/json (curl: --json, or -H 'content-type: application/json'). Nothing was sent.`,
    );
  }

  /**
   * A request a server may route to more than one governed route, or to a governed route under
   * a reading the gate cannot key (`what` says which readings disagree).
   */
  static ambiguousRoute(what: string): ArgumentRefusal {
    return new ArgumentRefusal(
      'ambiguous_route',
      null,
      `Servers may route this request differently (${what}), so the gate cannot tell which effect it asks for. Send one method and the route's canonical spelling. Nothing was sent.`,
    );
  }

  /**
   * A GraphQL request on a route a GraphQL tool governs whose document or parameters the gate
   * cannot read (`what` says why): a server would refuse it or read it its own way.
   */
  static graphqlInvalid(what: string): ArgumentRefusal {
    return new ArgumentRefusal(
      'graphql_invalid',
      null,
      `The gate cannot read this GraphQL request (${what}), and a tool governs mutations on this endpoint. Send one operation as {"query", "variables", "operationName"} in an application/json body (or a GET query string). Nothing was sent.`,
    );
  }

  /**
   * A GraphQL request that servers may execute as more than one call, or as another call than the
   * one the gate would key (`what` says where).
   */
  static graphqlAmbiguous(what: string): ArgumentRefusal {
    return new ArgumentRefusal(
      'arguments_ambiguous',
      null,
      `The gate cannot tell which one mutation this GraphQL request performs (${what}), so it cannot key it. Send one governed mutation field per request, each argument once. Nothing was sent.`,
    );
  }

  static tooDeep(path: string, limits: BodyLimits): ArgumentRefusal {
    return new ArgumentRefusal(
      'body_too_complex',
      path,
      `The JSON body nests arrays and objects deeper than ${limits.maxDepth} levels (at ${path}). The gate reads every governed body before deciding, and refuses shapes no API payload needs. Flatten the body. Nothing was sent.`,
    );
  }

  static tooManyNodes(limits: BodyLimits): ArgumentRefusal {
    return new ArgumentRefusal(
      'body_too_complex',
      null,
      `The body holds more than ${limits.maxNodes} values and member names (or form fields). The gate reads every governed body before deciding, and refuses shapes no API payload needs. Send fewer items per call. Nothing was sent.`,
    );
  }

  /**
   * The agent's own idempotency key, or the body the gate's key goes into, cannot be used as the
   * tool's `idempotency` section asks (idempotency-key.ts); `why` ends the sentence.
   */
  static idempotencyKey(path: string | null, toolId: string, why: string): ArgumentRefusal {
    return new ArgumentRefusal(
      'idempotency_key',
      path,
      `Tool ${toolId} sends an idempotency key with every attempt, and ${why}. Nothing was sent.`,
    );
  }
}
