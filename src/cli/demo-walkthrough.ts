import { loadOperationReport, parseApprovalDecision } from '../admin/index.js';
import { EffectgateError } from '../errors.js';
import type { Store } from '../store/index.js';
import { describeDecision } from './approvals-command.js';
import { labelled, printable } from './cli-text.js';
import type { DemoApi } from './demo-api.js';
import { renderReport } from './trail-command.js';

/** One answer the agent got through the proxy. */
interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly json: Readonly<Record<string, unknown>>;
}

/** What the walk-through needs: the agent's way out, the tracker, the gate's store, where to print. */
export interface WalkThroughContext {
  /** Sends one JSON POST through the proxy, as an agent with `HTTP_PROXY` set would. */
  readonly post: (url: string, body: unknown, run: string) => Promise<Answer>;
  readonly api: DemoApi;
  readonly store: Store;
  readonly say: (lines: readonly string[]) => void;
  /** True once Ctrl-C was pressed: the walk-through stops between steps. */
  readonly interrupted: () => boolean;
}

/** Stops the walk-through between steps (Ctrl-C). */
export class DemoInterrupted extends Error {}

/**
 * The six steps of `effectgate demo`, each printed in plain words. Returns the operation whose
 * response was dropped, the one with the most to show on its timeline page.
 */
export async function walkThrough(ctx: WalkThroughContext): Promise<string> {
  const { api, say, post } = ctx;
  const issues = `${api.url}/repos/acme/api/issues`;
  const step = (n: number, text: string): void => {
    if (ctx.interrupted()) throw new DemoInterrupted();
    say(['', `${n}. ${text}`]);
  };
  const ledger = (): void => say([`   fake API ledger: ${effects(api)}`]);

  const disk = { title: 'Disk full on db-1' };
  step(1, 'An agent (run run-1) opens an issue through the proxy:');
  say([`   POST ${issues} ${JSON.stringify(disk)}`]);
  const first = expect(1, await post(issues, disk, 'run-1'), 201);
  const op1 = header(first, 'effectgate-operation');
  say([
    `   → ${first.status} Created: issue #${String(first.json['number'])} ${printable(String(first.json['html_url']))}`,
    `     verdict ${header(first, 'effectgate-verdict')}, operation ${op1};`,
    `     the gate sent it with Idempotency-Key: ${op1} (the operation's id)`,
  ]);
  ledger();

  step(2, 'A second run of the agent (run-2) proposes the same issue (same repository, same title):');
  const dup = expect(2, await post(issues, disk, 'run-2'), 409);
  const source = (dup.json['source'] ?? {}) as Record<string, unknown>;
  say([
    `   → ${dup.status} ${String(dup.json['verdict'])}: the gate answered itself and sent nothing. It points at the earlier run:`,
    ...para(
      `run ${printable(String(source['run_id']))}, operation ${printable(String(source['operation_id']))}${source['operation_id'] === op1 ? ' (the one from step 1),' : ','} result ${printable(String(source['destination_ref']))}`,
    ),
    '     and tells the agent, in its "detail" (and "message"):',
    ...para(`“${printable(String(dup.json['detail']))}”`),
  ]);
  ledger();

  const cert = { title: 'TLS cert expires in 7 days' };
  step(3, 'The agent (run-3) opens another issue, but the response is lost on the way back:');
  say(['   the fake API creates the issue, then cuts the connection before answering.']);
  api.dropNextResponse();
  const lost = expect(3, await post(issues, cert, 'run-3'), 502);
  const op2 = header(lost, 'effectgate-operation');
  say([
    `   → ${lost.status}: dispatch_state ${String(lost.json['dispatch_state'])}, operation_state ${String(lost.json['operation_state'])}`,
    ...para(
      `(operation ${op2}). The request went out and no answer came back: the issue may or may not exist. A lost answer is "unknown", never "failed", so the gate will not let a blind retry through.`,
    ),
  ]);
  ledger();

  step(4, 'The agent retries the same request:');
  const held = expect(4, await post(issues, cert, 'run-3'), 428);
  const approvalId = String(held.json['approval_id']);
  say([
    `   → ${held.status} ${String(held.json['verdict'])}: nothing was sent; approval ${approvalId} was requested`,
    ...para(
      `for operation ${printable(String(held.json['operation_id']))}. The policy claims no idempotency guarantee and gives no way to look the issue up, so a person decides.`,
    ),
  ]);
  ledger();

  step(5, 'An operator approves that one retry (what `effectgate approvals approve <id>` records):');
  const decision = parseApprovalDecision(approvalId, 'approve', {
    by: 'demo-operator',
    reason: 'the tracker replays a repeated Idempotency-Key, so the same key cannot create a second issue',
  });
  const approval = await ctx.store.decideApproval(decision);
  const [summary = '', ...card] = describeDecision('approve', approval);
  say([...labelled('', summary, 3), ...card.map((l) => (l === '' ? l : `   ${l}`))]);
  say(['', '   The agent retries again:']);
  const retried = expect(5, await post(issues, cert, 'run-3'), 201);
  const replayed = retried.headers['idempotent-replayed'] === 'true';
  say([
    `   → ${retried.status}: issue #${String(retried.json['number'])} ${printable(String(retried.json['html_url']))}${replayed ? ' (Idempotent-Replayed: true)' : ''}`,
    ...para(
      `The retry carried the same Idempotency-Key (${op2}), so the tracker answered with the issue it had created in step 3 instead of creating a second one.`,
    ),
  ]);
  ledger();
  say([
    '     what each POST carried (key: its Idempotency-Key) and what the tracker did with it:',
    ...api.ledger().posts.map((p, i) => `     POST ${i + 1}  ${postLine(p)}`),
  ]);

  step(6, 'The trail of that operation (what `effectgate trail <operation-id>` prints):');
  const report = await loadOperationReport(ctx.store, op2);
  if (report === null) throw new EffectgateError('EG_ERR_NOT_FOUND', `No operation ${op2} in the store.`);
  say(['', ...renderReport(report)]);
  return op2;
}

/** Text wrapped at the commands' width, indented under a step's answer. */
function para(text: string): string[] {
  return labelled('', text, 5);
}

function effects(api: DemoApi): string {
  const { issues, posts } = api.ledger();
  return `${issues.length} effect(s) (issues created) from ${posts.length} POST(s)`;
}

function postLine(p: ReturnType<DemoApi['ledger']>['posts'][number]): string {
  const key = `key ${p.idempotencyKey ?? '(none)'}`;
  const what =
    p.issue === null
      ? 'refused'
      : p.result === 'created'
        ? `created #${p.issue.number} "${printable(p.issue.title)}"`
        : `replayed #${p.issue.number}, created nothing`;
  return `${key}  ${what}${p.dropped ? ' (answer dropped)' : ''}`;
}

function header(answer: Answer, name: string): string {
  const value = answer.headers[name];
  return typeof value === 'string' ? printable(value) : '-';
}

/** The demo only makes sense when every step gets the answer it explains. */
function expect(step: number, answer: Answer, status: number): Answer {
  if (answer.status !== status) {
    throw new Error(
      `demo step ${step} expected ${status} from the gate, got ${answer.status}: ${JSON.stringify(answer.json)}`,
    );
  }
  return answer;
}
