/**
 * Slack on its own terms, end to end: the real `effectgate proxy` with the shipped Slack
 * classification (governing a loopback stand-in instead of slack.com), undici and the real
 * `@slack/web-api` client through it, and a real store (PGlite always, PostgreSQL when DATABASE_URL
 * is set). Slack answers `200 {"ok": false, "error": "not_in_channel"}` when it posted nothing:
 * that attempt is failed (decided by `failed_if $.ok == false`, error code `not_in_channel`), the
 * key is not confirmed, and the corrected post goes out once. The stand-in's own ledger is
 * compared with the trail.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode, WebClient } from '@slack/web-api';
import { ProxyAgent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GateUnderTest, startGateUnderTest } from '../helpers/gate-under-test.js';
import { type SlackStandIn, slackPolicyFor, startSlackStandIn } from '../helpers/slack-stand-in.js';
import { storeTargets } from '../helpers/store.js';

const SHIPPED = readFileSync(new URL('../../policies/slack.yaml', import.meta.url), 'utf8');

for (const target of storeTargets()) {
  describe(`Slack's 200 ok:false through the proxy (${target.name})`, { timeout: 60_000 }, () => {
    let slack: SlackStandIn;
    let gate: GateUnderTest;
    let policies: string;

    beforeAll(async () => {
      slack = await startSlackStandIn();
      policies = mkdtempSync(join(tmpdir(), 'effectgate-slack-'));
      writeFileSync(join(policies, 'slack.yaml'), slackPolicyFor(SHIPPED, '127.0.0.1'));
      gate = await startGateUnderTest(target, policies);
    }, 120_000);

    afterAll(async () => {
      await gate?.close();
      await slack?.close();
      if (policies !== undefined) rmSync(policies, { recursive: true, force: true });
    });

    const post = (run: string, channel: string, text: string) =>
      gate.send(`${slack.url}/api/chat.postMessage`, { channel, text }, { 'effectgate-run': run });

    it('a refused post is failed and its key not confirmed; the corrected post goes out once', async () => {
      const first = await post('agent-1', 'C1', 'Deploy of api v42 failed');
      expect(first.status).toBe(200);
      expect(first.json).toEqual({ ok: false, error: 'not_in_channel' });
      expect(first.headers['effectgate-verdict']).toBe('allow');
      const op = first.headers['effectgate-operation'] as string;
      const refused = await gate.trail(op);
      expect(refused.operation.state).toBe('failed');
      expect(refused.operation.attempts[0]).toMatchObject({
        status: 200,
        outcomeRule: 'failed_if $.ok == false',
        errorCode: 'not_in_channel',
      });
      // The CLI wraps long lines: compare with the whitespace folded.
      const trail = (await gate.cli(['trail', op])).stdout.replace(/\s+/g, ' ');
      expect(trail).toContain(
        'response: HTTP 200, decided by failed_if $.ok == false, error code not_in_channel',
      );
      expect(slack.ledger).toEqual([]);

      slack.invite('C1');
      const corrected = await post('agent-1', 'C1', 'Deploy of api v42 failed');
      expect(corrected.status).toBe(200);
      expect(corrected.headers['effectgate-verdict']).toBe('allow');
      expect(corrected.json).toMatchObject({ ok: true, channel: 'C1' });
      const settled = await gate.trail(corrected.headers['effectgate-operation'] as string);
      expect(settled.operation.state).toBe('succeeded');
      expect(slack.ledger.map((m) => [m.channel, m.text])).toEqual([['C1', 'Deploy of api v42 failed']]);
    });

    it('a genuine success then a repeat: a duplicate, and the stand-in posted exactly one message', async () => {
      slack.invite('C2');
      const first = await post('agent-2', 'C2', 'Nightly backup done');
      expect(first.headers['effectgate-verdict']).toBe('allow');
      expect(first.json).toMatchObject({ ok: true });
      const repeat = await post('agent-3', 'C2', 'Nightly backup done');
      // The gate's own answer, in Slack's dialect (200 ok: false), naming the earlier post.
      expect(repeat.headers['effectgate-verdict']).toBe('duplicate');
      expect(repeat.json).toMatchObject({
        ok: false,
        error: 'effectgate_duplicate',
        effectgate: { verdict: 'duplicate', operation_id: first.headers['effectgate-operation'] },
      });
      expect(slack.ledger.filter((m) => m.channel === 'C2')).toHaveLength(1);
    });

    it("the real @slack/web-api client: its not_in_channel error, the corrected post, then the gate's duplicate", async () => {
      const proxy = new ProxyAgent({ uri: gate.proxy.url, proxyTunnel: false });
      try {
        const client = new WebClient('xoxb-test', {
          slackApiUrl: `${slack.url}/api/`,
          // The client's fetch, through the gate as an agent's HTTP_PROXY would send it.
          fetch: ((url: string, init: RequestInit) =>
            undiciFetch(url, {
              ...(init as object),
              dispatcher: proxy,
              headers: { ...(init.headers as Record<string, string>), 'effectgate-run': 'sdk-1' },
            })) as unknown as typeof fetch,
          retryConfig: { retries: 0 },
        });
        const message = { channel: 'C3', text: 'Rotate the signing key' };
        await expect(client.chat.postMessage(message)).rejects.toMatchObject({
          code: ErrorCode.PlatformError,
          data: { ok: false, error: 'not_in_channel' },
        });
        slack.invite('C3');
        const posted = await client.chat.postMessage(message);
        expect(posted).toMatchObject({ ok: true, channel: 'C3' });
        // The same message again: the gate answers itself, in Slack's dialect, which the client
        // raises as a platform error without retrying.
        await expect(client.chat.postMessage(message)).rejects.toMatchObject({
          code: ErrorCode.PlatformError,
          data: { ok: false, error: 'effectgate_duplicate' },
        });
        expect(slack.ledger.filter((m) => m.channel === 'C3').map((m) => m.text)).toEqual([
          'Rotate the signing key',
        ]);
        const sent = slack.upstream.requests.filter((r) => r.body.toString().includes('Rotate'));
        expect(sent).toHaveLength(2);
      } finally {
        await proxy.close();
      }
    });
  });
}
