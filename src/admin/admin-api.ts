/**
 * The admin API routes under `/api` (authentication is checked before they are reached): the
 * operations and approvals an operator investigates and decides. JSON in and out; refusals are
 * `application/problem+json`.
 *
 *   GET  /api/operations?state=&tool=&tenant=&since=&limit=   { operations, counts }
 *   GET  /api/operations/:id                                  { operation, decisions, observations, approvals, trail }
 *   GET  /api/runs?halted=true|false&limit=                     { runs }
 *   GET  /api/runs/:id                                        { run_id, runs, decisions }
 *   POST /api/runs/:id/release  { by, reason, tenant?, area?, agent? }   RunRecord (after the release)
 *   GET  /api/approvals?state=&limit=                         { approvals }
 *   GET  /api/approvals/:id                                   ApprovalRecord
 *   POST /api/approvals/:id/approve|deny|revoke               ApprovalRecord (after the decision)
 *   POST /api/operations/:id/resolve      { as, by, reason, ref? }          ObservationResult
 *   POST /api/operations/:id/observations { kind, by, settles?, status?, destination_ref?,
 *                                           payload? | payload_fingerprint?, note? }  ObservationResult
 *   POST /api/observations                the same, plus operation: { id | idempotency_key | destination_ref }
 *   GET  /api/grants?run=&limit=                               { grants }
 *   POST /api/grants            { run, tool?, tenant?, area?, agent?, by, reason, ttl? }   GrantRecord
 *   POST /api/grants/:id/revoke { by, reason }                 GrantRecord
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type ErrorCode, errorAnswer, isEffectgateError } from '../errors.js';
import type { OperationState, Store } from '../store/index.js';
import {
  badRequest,
  codedProblem,
  HttpProblem,
  methodNotAllowed,
  notFound,
  readJsonObject,
  sendJson,
} from './admin-http.js';
import {
  APPROVAL_ACTIONS,
  DEFAULT_LIST_LIMIT,
  InputError,
  isApprovalAction,
  OPERATION_STATES,
  parseApprovalDecision,
  parseApprovalState,
  parseDecidedBy,
  parseDecisionReason,
  parseLimit,
  parseName,
  parseOperationFilter,
} from './admin-input.js';
import { AdminRouter } from './admin-router.js';
import { GRANT_FIELDS, parseGrant } from './grant-input.js';
import {
  OBSERVATION_FIELDS,
  parseObservation,
  parseOperationSelector,
  parseResolution,
  RESOLUTION_FIELDS,
} from './observation-input.js';
import { parseRunRelease, RUN_RELEASE_FIELDS } from './run-input.js';
import { loadOperationReport } from './trail.js';

export interface AdminApiContext {
  readonly store: Store;
  /** Keys the fingerprint of a posted observation's payload (`AdminServerOptions.payloadKey`). */
  readonly payloadKey: string;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** The path segments after `/api`, percent-decoded. */
  readonly segments: readonly string[];
  readonly query: URLSearchParams;
}

type Handler = (ctx: AdminApiContext, params: Readonly<Record<string, string>>) => Promise<unknown>;

/** Every `/api` route (paths after `/api`); `admin-router.ts` matches them. */
const ROUTER = new AdminRouter<Handler>([
  { method: 'GET', path: '/operations', handler: listOperations },
  { method: 'GET', path: '/operations/:id', handler: getOperation },
  { method: 'POST', path: '/operations/:id/resolve', handler: resolveOperation },
  { method: 'POST', path: '/operations/:id/observations', handler: postObservation },
  { method: 'POST', path: '/observations', handler: postObservationByLookup },
  { method: 'GET', path: '/runs', handler: listRuns },
  { method: 'GET', path: '/runs/:id', handler: getRun },
  { method: 'POST', path: '/runs/:id/release', handler: releaseRun },
  { method: 'GET', path: '/approvals', handler: listApprovals },
  { method: 'GET', path: '/approvals/:id', handler: getApproval },
  { method: 'POST', path: `/approvals/:id/:action(${APPROVAL_ACTIONS.join('|')})`, handler: decideApproval },
  { method: 'GET', path: '/grants', handler: listGrants },
  { method: 'POST', path: '/grants', handler: createGrant },
  { method: 'POST', path: '/grants/:id/revoke', handler: revokeGrant },
]);

/** Routes one authenticated `/api/*` request; throws `HttpProblem` (or a store error) on refusal. */
export async function handleAdminApi(ctx: AdminApiContext): Promise<void> {
  const hit = ROUTER.match(ctx.req.method, ctx.segments);
  if (hit.kind === 'not_found') throw notFound(`No admin API route ${describePath(ctx.segments)}.`);
  if (hit.kind === 'wrong_method') throw methodNotAllowed(ctx.req.method, hit.allow);
  const body = await hit.handler(ctx, hit.params);
  sendJson(ctx.req, ctx.res, 200, body);
}

function describePath(segments: readonly string[]): string {
  const path = `/api/${segments.join('/')}`;
  return JSON.stringify(path.length > 120 ? `${path.slice(0, 120)}…` : path);
}

/** The query parameters, each at most once and only those the route knows. */
function queryOf<K extends string>(ctx: AdminApiContext, allowed: readonly K[]): Partial<Record<K, string>> {
  const out: Partial<Record<K, string>> = {};
  for (const name of new Set(ctx.query.keys())) {
    if (!(allowed as readonly string[]).includes(name)) {
      throw badRequest(
        allowed.length === 0
          ? `Unknown query parameter ${JSON.stringify(name)}: this route takes none.`
          : `Unknown query parameter ${JSON.stringify(name)}; use ${allowed.join(', ')}.`,
      );
    }
    const values = ctx.query.getAll(name);
    if (values.length > 1)
      throw badRequest(`Query parameter ${JSON.stringify(name)} is given more than once.`);
    out[name as K] = values[0]!;
  }
  return out;
}

function idOf(what: string, raw: string): string {
  try {
    return parseName(what, raw);
  } catch (err) {
    if (err instanceof InputError) throw badRequest(err.message);
    throw err;
  }
}

/** Every state, 0 where there are none, so the shape never depends on the data. */
export function fullCounts(counts: Partial<Record<OperationState, number>>): Record<OperationState, number> {
  const full = {} as Record<OperationState, number>;
  for (const state of OPERATION_STATES) full[state] = counts[state] ?? 0;
  return full;
}

async function listOperations(ctx: AdminApiContext): Promise<unknown> {
  const q = queryOf(ctx, ['state', 'tool', 'tenant', 'since', 'limit']);
  const filter = parseOperationFilter(q);
  const { state: _state, limit: _limit, ...countFilter } = filter;
  const [operations, counts] = await Promise.all([
    ctx.store.listOperations(filter),
    ctx.store.countOperations(countFilter),
  ]);
  return { operations, counts: fullCounts(counts) };
}

async function getOperation(
  ctx: AdminApiContext,
  { id: rawId }: Readonly<Record<string, string>>,
): Promise<unknown> {
  queryOf(ctx, []);
  const id = idOf('operation id', rawId!);
  const report = await loadOperationReport(ctx.store, id);
  if (report === null) throw notFound(`No operation ${JSON.stringify(id)}.`, 'EG_ERR_NOT_FOUND');
  return report;
}

async function listRuns(ctx: AdminApiContext): Promise<unknown> {
  const q = queryOf(ctx, ['halted', 'limit']);
  if (q.halted !== undefined && q.halted !== 'true' && q.halted !== 'false') {
    throw badRequest('halted must be true or false.');
  }
  const runs = await ctx.store.listRuns({
    ...(q.halted === undefined ? {} : { halted: q.halted === 'true' }),
    limit: q.limit === undefined ? DEFAULT_LIST_LIMIT : parseLimit('limit', q.limit),
  });
  return { runs };
}

async function getRun(
  ctx: AdminApiContext,
  { id: rawId }: Readonly<Record<string, string>>,
): Promise<unknown> {
  queryOf(ctx, []);
  const id = idOf('run id', rawId!);
  const [decisions, runs] = await Promise.all([
    ctx.store.listDecisions({ runId: id }),
    ctx.store.listRuns({ runId: id }),
  ]);
  // A run exists only through what it proposed: no decision, no run.
  if (decisions.length === 0)
    throw notFound(`No decision recorded for run ${JSON.stringify(id)}.`, 'EG_ERR_NOT_FOUND');
  // `runs`: the loop breaker's record of it, one per scope it was skipped in (none: never skipped).
  return { run_id: id, runs, decisions };
}

async function releaseRun(
  ctx: AdminApiContext,
  { id: rawId }: Readonly<Record<string, string>>,
): Promise<unknown> {
  queryOf(ctx, []);
  const body = await readJsonObject(ctx.req);
  onlyMembers(body, RUN_RELEASE_FIELDS, 'by, reason and optionally tenant, area, agent');
  return ctx.store.releaseRun(parseRunRelease(idOf('run id', rawId!), body));
}

async function listApprovals(ctx: AdminApiContext): Promise<unknown> {
  const q = queryOf(ctx, ['state', 'limit']);
  const approvals = await ctx.store.listApprovals({
    ...(q.state === undefined ? {} : { state: parseApprovalState('state', q.state) }),
    limit: q.limit === undefined ? DEFAULT_LIST_LIMIT : parseLimit('limit', q.limit),
  });
  return { approvals };
}

async function getApproval(
  ctx: AdminApiContext,
  { id: rawId }: Readonly<Record<string, string>>,
): Promise<unknown> {
  queryOf(ctx, []);
  const id = idOf('approval id', rawId!);
  const approval = await ctx.store.getApproval(id);
  if (approval === null) throw notFound(`No approval ${JSON.stringify(id)}.`, 'EG_ERR_NOT_FOUND');
  return approval;
}

const DECISION_FIELDS = ['by', 'reason', 'ttl'] as const;

async function decideApproval(
  ctx: AdminApiContext,
  { id: rawId, action }: Readonly<Record<string, string>>,
): Promise<unknown> {
  queryOf(ctx, []);
  const id = idOf('approval id', rawId!);
  if (action === undefined || !isApprovalAction(action)) throw notFound('No such approval action.');
  const body = await readJsonObject(ctx.req);
  onlyMembers(body, DECISION_FIELDS, `by, reason${action === 'approve' ? ' and optionally ttl' : ''}`);
  const decision = parseApprovalDecision(id, action, {
    by: body['by'],
    reason: body['reason'],
    ...(body['ttl'] === undefined ? {} : { ttl: body['ttl'] }),
  });
  return ctx.store.decideApproval(decision);
}

async function resolveOperation(
  ctx: AdminApiContext,
  { id: rawId }: Readonly<Record<string, string>>,
): Promise<unknown> {
  queryOf(ctx, []);
  const id = idOf('operation id', rawId!);
  const body = await readJsonObject(ctx.req);
  onlyMembers(body, RESOLUTION_FIELDS, 'as, by, reason and optionally ref');
  const input = parseResolution(
    id,
    { as: body['as'], by: body['by'], reason: body['reason'], ref: body['ref'] },
    'api',
  );
  return ctx.store.addObservation(input);
}

async function postObservation(
  ctx: AdminApiContext,
  { id: rawId }: Readonly<Record<string, string>>,
): Promise<unknown> {
  queryOf(ctx, []);
  const id = idOf('operation id', rawId!);
  const body = await readJsonObject(ctx.req);
  onlyMembers(body, OBSERVATION_FIELDS, OBSERVATION_FIELDS.join(', '));
  return ctx.store.addObservation(parseObservation(id, body, ctx.payloadKey));
}

/** A webhook knows the idempotency key the gate sent or the destination's reference, not our id. */
async function postObservationByLookup(ctx: AdminApiContext): Promise<unknown> {
  queryOf(ctx, []);
  const body = await readJsonObject(ctx.req);
  const { operation: selector, ...rest } = body;
  onlyMembers(rest, OBSERVATION_FIELDS, `operation, ${OBSERVATION_FIELDS.join(', ')}`);
  const lookup = parseOperationSelector(selector);
  let id: string;
  if ('id' in lookup) {
    id = lookup.id;
  } else {
    const found = await ctx.store.findOperations(lookup);
    const what =
      'idempotencyKey' in lookup
        ? `idempotency key ${JSON.stringify(lookup.idempotencyKey)}`
        : `destination reference ${JSON.stringify(lookup.destinationRef.slice(0, 200))}`;
    if (found.length === 0) throw notFound(`No operation has the ${what}.`, 'EG_ERR_NOT_FOUND');
    if (found.length > 1) {
      throw codedProblem(
        'EG_ERR_OPERATION_AMBIGUOUS',
        'More than one operation matches',
        `The ${what} names ${found.length} operations (${found.map((o) => o.id).join(', ')}); post to /api/operations/:id/observations for one of them.`,
      );
    }
    id = found[0]!.id;
  }
  return ctx.store.addObservation(parseObservation(id, rest, ctx.payloadKey));
}

async function listGrants(ctx: AdminApiContext): Promise<unknown> {
  const q = queryOf(ctx, ['run', 'limit']);
  const grants = await ctx.store.listGrants({
    ...(q.run === undefined ? {} : { runId: idOf('run', q.run) }),
    limit: q.limit === undefined ? DEFAULT_LIST_LIMIT : parseLimit('limit', q.limit),
  });
  return { grants };
}

async function createGrant(ctx: AdminApiContext): Promise<unknown> {
  queryOf(ctx, []);
  const body = await readJsonObject(ctx.req);
  onlyMembers(body, GRANT_FIELDS, GRANT_FIELDS.join(', '));
  return ctx.store.createGrant(parseGrant(body));
}

async function revokeGrant(
  ctx: AdminApiContext,
  { id: rawId }: Readonly<Record<string, string>>,
): Promise<unknown> {
  queryOf(ctx, []);
  const id = idOf('grant id', rawId!);
  const body = await readJsonObject(ctx.req);
  onlyMembers(body, ['by', 'reason'], 'by and reason');
  return ctx.store.revokeGrant({
    grantId: id,
    by: parseDecidedBy('by', body['by']),
    reason: parseDecisionReason('reason', body['reason']),
  });
}

function onlyMembers(body: Readonly<Record<string, unknown>>, allowed: readonly string[], use: string): void {
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) {
    throw badRequest(`Unknown member ${JSON.stringify(unknown[0]!.slice(0, 60))} in the body; use ${use}.`);
  }
}

/** Titles of the coded problems the API expects to answer; status and slug are the catalogue's. */
const PROBLEM_TITLES: Readonly<Partial<Record<ErrorCode, string>>> = {
  EG_ERR_NOT_FOUND: 'Not found',
  EG_ERR_APPROVAL_STATE: 'Approval not in a state for this action',
  EG_ERR_OPERATION_STATE: 'Operation not in a state this decision applies to',
  EG_ERR_RUN_STATE: 'Run not halted',
  EG_ERR_CONFIG_INVALID: 'Bad request',
};

/** Any error → the problem the API answers with. Unexpected errors say nothing of their insides. */
export function problemOf(err: unknown): HttpProblem {
  if (err instanceof HttpProblem) return err;
  if (err instanceof InputError) return badRequest(err.message);
  if (isEffectgateError(err)) {
    switch (err.code) {
      case 'EG_ERR_STORE_UNAVAILABLE':
        return codedProblem(err.code, 'Store unavailable', `${err.message} (see GET /readyz).`, {
          'retry-after': '5',
        });
      default:
        return codedProblem(
          err.code,
          PROBLEM_TITLES[err.code] ??
            (errorAnswer(err.code).status >= 500 ? 'Internal error' : 'Request refused'),
          err.message,
        );
    }
  }
  return new HttpProblem({
    status: 500,
    problem: 'internal',
    title: 'Internal error',
    detail: 'The admin API failed unexpectedly; the gate log has the error.',
  });
}
