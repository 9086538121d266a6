/**
 * A Slack Web API stand-in on loopback for tests: `chat.postMessage` answers as Slack does, HTTP
 * 200 whatever happened, `{"ok": false, "error": "not_in_channel"}` while the bot is not a member
 * of the channel, and `{"ok": true, "ts": …}` once it is, and keeps a ledger of the messages it
 * really posted: the destination's own record to compare the gate's trail with. Reads JSON and
 * form bodies (`@slack/web-api` sends forms).
 */
import { startUpstream, type Upstream } from './upstream.js';

export interface PostedMessage {
  readonly channel: string;
  readonly text: string;
  readonly ts: string;
}

export interface SlackStandIn {
  /** `http://127.0.0.1:<port>`; the Web API is under `/api/`. */
  readonly url: string;
  readonly upstream: Upstream;
  /** Messages posted, in order: what Slack would show in its channels. */
  readonly ledger: PostedMessage[];
  /** Adds the bot to a channel (what a person does after `not_in_channel`). */
  invite(channel: string): void;
  close(): Promise<void>;
}

export async function startSlackStandIn(): Promise<SlackStandIn> {
  const ledger: PostedMessage[] = [];
  const members = new Set<string>();
  const upstream = await startUpstream((request, res) => {
    const answer = (json: Record<string, unknown>): void => {
      const body = JSON.stringify(json);
      res.writeHead(200, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
      });
      res.end(body);
    };
    if (request.url !== '/api/chat.postMessage') return answer({ ok: false, error: 'unknown_method' });
    const text = request.body.toString('utf8');
    const args: Record<string, unknown> = (request.headers['content-type'] ?? '').includes('json')
      ? (JSON.parse(text) as Record<string, unknown>)
      : Object.fromEntries(new URLSearchParams(text));
    const channel = String(args['channel'] ?? '');
    if (!members.has(channel)) return answer({ ok: false, error: 'not_in_channel' });
    const ts = `1700000000.${String(ledger.length + 1).padStart(6, '0')}`;
    ledger.push({ channel, text: String(args['text'] ?? ''), ts });
    return answer({ ok: true, channel, ts, message: { text: args['text'] } });
  });
  return {
    url: upstream.url,
    upstream,
    ledger,
    invite: (channel) => void members.add(channel),
    close: () => upstream.close(),
  };
}

/** The shipped `policies/slack.yaml`, governing `host` instead of slack.com (tests cannot resolve it). */
export function slackPolicyFor(shipped: string, host: string): string {
  const text = shipped.replace('hosts: [slack.com]', `hosts: [${host}]`);
  // Its examples post to https://slack.com; the tests here send their own requests.
  return text.slice(0, text.indexOf('\nexamples:'));
}
