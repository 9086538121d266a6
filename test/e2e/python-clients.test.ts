/**
 * Real Python clients through the real `effectgate proxy` binary: requests, httpx, PyGithub and
 * stripe-python (Debian's packages, run by Debian's Python; a library that is not installed makes
 * its tests report themselves skipped, with the reason), each over plain HTTP and over HTTPS the
 * gate intercepts (the client trusting the gate's CA through the variable or setting its library
 * reads), against loopback stand-ins of their APIs that keep a ledger (helpers/issue-tracker.ts).
 *
 * For every client: the first call is sent once; the same call again is a duplicate the library
 * surfaces with the gate's reason (GitHub's and Stripe's tools answer in their API's own error
 * dialect, as the shipped policies do, so PyGithub and stripe-python raise their usual exception
 * and stripe-python, which repeats a 409 on its own, repeats nothing); the trail and the
 * stand-in's ledger agree. Then the stand-in performs the effect and cuts the socket while the
 * library retries on its own (httpx, which never repeats a status, is repeated by the agent): the
 * effect is never performed twice, and the retry is what the tool's unknown rule says
 * (docs/design.md §3 "Unknown is dangerous"): GitHub's looked up first (a duplicate), Stripe's sent
 * again with the same Idempotency-Key (replayed by the destination), the plain ledger's held for a
 * person.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GateUnderTest, startGateUnderTest } from '../helpers/gate-under-test.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { runCli } from '../helpers/proxy-process.js';
import { storeTargets } from '../helpers/store.js';
import { selfSignedCert } from '../helpers/upstream.js';
import { type ClientCall, pythonModuleMissing, runPythonClient } from './clients/python-client.js';

const POLICIES = new URL('../fixtures/client-policies/', import.meta.url).pathname;
const PAYMENT_INTENTS = '/v1/payment_intents';
const TRANSPORTS = ['http', 'https'] as const;
type Transport = (typeof TRANSPORTS)[number];

/** `effectgate trail --json`: the operation and its timeline. */
interface TrailReport {
  readonly operation: { readonly id: string; readonly state: string };
  readonly trail: {
    readonly timeline: readonly {
      readonly type: string;
      readonly verdict?: string;
      readonly dispatch_state?: string;
      readonly retry_decision?: string;
      readonly replayed?: boolean;
    }[];
  };
}

const missing = {
  requests: pythonModuleMissing('requests'),
  httpx: pythonModuleMissing('httpx'),
  github: pythonModuleMissing('github'),
  stripe: pythonModuleMissing('stripe'),
};
/** `it`, or `it.skip` naming why the client cannot run here. */
const clientIt = (module: keyof typeof missing, title: string, fn: () => Promise<void>): void => {
  const reason = missing[module];
  if (reason === null) it(title, fn, 120_000);
  else it.skip(`${title}: skipped, ${reason}`, () => undefined);
};

for (const target of storeTargets()) {
  describe(`Python clients through the proxy binary (${target.name})`, () => {
    let dir: string;
    let caPem: string;
    const trackers = {} as Record<Transport, IssueTracker>;
    let gate: GateUnderTest;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'effectgate-e2e-clients-'));
      const init = await runCli(['ca', 'init', '--dir', join(dir, 'ca')]);
      expect(init.code).toBe(0);
      caPem = join(dir, 'ca', 'ca.pem');
      const cert = selfSignedCert();
      writeFileSync(join(dir, 'upstream.pem'), cert.cert);
      const honorsKeys = (collection: string): boolean => collection === PAYMENT_INTENTS;
      trackers.http = await startIssueTracker({ honorsKeys });
      trackers.https = await startIssueTracker({ honorsKeys, tls: cert });
      gate = await startGateUnderTest(target, POLICIES, {
        extraArgs: [
          '--ca-dir',
          join(dir, 'ca'),
          '--upstream-ca',
          join(dir, 'upstream.pem'),
          '--allow-connect-ports',
          String(trackers.https.port),
        ],
      });
    }, 120_000);

    afterAll(async () => {
      await gate?.close();
      await trackers.http?.close();
      await trackers.https?.close();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    });

    const base = (t: Transport): string => `${t}://127.0.0.1:${trackers[t].port}`;
    /** The proxy for both schemes, and the gate's CA for the libraries that read a variable. */
    const env = (): NodeJS.ProcessEnv => ({
      HTTP_PROXY: gate.proxy.url,
      http_proxy: gate.proxy.url,
      HTTPS_PROXY: gate.proxy.url,
      https_proxy: gate.proxy.url,
      NO_PROXY: '',
      no_proxy: '',
      REQUESTS_CA_BUNDLE: caPem,
      SSL_CERT_FILE: caPem,
    });
    const trailOf = async (tool: string, key: readonly string[]): Promise<TrailReport> => {
      const r = await gate.cli(['trail', '--tool', tool, '--key', JSON.stringify(key), '--json']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      return JSON.parse(r.stdout) as TrailReport;
    };
    const of = (report: TrailReport, type: string) => report.trail.timeline.filter((e) => e.type === type);

    /** What one client's duplicate looks like: the stand-in's collection and the trail's key. */
    interface Case {
      readonly collection: string;
      readonly title: string;
      readonly tool: string;
      readonly key: readonly string[];
      /** The duplicate's status in the tool's dialect, and the exception the library raised. */
      readonly status: number;
      readonly error: string;
    }

    /** First call allowed and sent once; the second a duplicate the library surfaced; trail = ledger. */
    async function expectOnceThenDuplicate(
      t: Transport,
      calls: readonly ClientCall[],
      c: Case,
    ): Promise<void> {
      expect(calls).toHaveLength(2);
      const [first, second] = calls as [ClientCall, ClientCall];
      expect(first).toMatchObject({ error: null, verdict: 'allow' });
      expect(second).toMatchObject({ status: c.status, verdict: 'duplicate', error: c.error });
      // The gate's reason, in what the library itself shows its user.
      expect(second.surfaced).toContain('already carried out');
      expect(second.surfaced).toContain(first.operation);
      const ledger = trackers[t].issues(c.collection).filter((i) => i.title === c.title);
      expect(ledger).toHaveLength(1);
      expect(first.body?.['html_url']).toBe(ledger[0]!.html_url);
      const report = await trailOf(c.tool, c.key);
      expect(report.operation).toMatchObject({ id: first.operation, state: 'succeeded' });
      expect(of(report, 'attempt')).toHaveLength(1);
      // Exactly two proposals: the library repeated neither answer on its own.
      expect(of(report, 'decision').map((d) => d.verdict)).toEqual(['allow', 'duplicate']);
    }

    for (const t of TRANSPORTS) {
      const ledgerCase = (title: string, error: string): Case => ({
        collection: '/ledger/books/entries',
        title,
        tool: 'ledger.create_entry',
        key: ['books', title],
        status: 409,
        error,
      });

      clientIt(
        'requests',
        `requests (${t}): once, then a duplicate it surfaces; trail = ledger`,
        async () => {
          const title = `requests twice ${t}`;
          const url = `${base(t)}/ledger/books/entries`;
          const calls = await runPythonClient('requests_client.py', [url, title, 'twice'], env());
          await expectOnceThenDuplicate(t, calls, ledgerCase(title, 'HTTPError'));
        },
      );

      clientIt('httpx', `httpx (${t}): once, then a duplicate it surfaces; trail = ledger`, async () => {
        const title = `httpx twice ${t}`;
        const url = `${base(t)}/ledger/books/entries`;
        const calls = await runPythonClient('httpx_client.py', [url, title], env());
        await expectOnceThenDuplicate(t, calls, ledgerCase(title, 'HTTPStatusError'));
      });

      clientIt('github', `PyGithub (${t}): once, then a duplicate it surfaces; trail = ledger`, async () => {
        const title = `PyGithub twice ${t}`;
        const calls = await runPythonClient('github_client.py', [base(t), 'acme/api', title, 'twice'], env());
        // GitHub's dialect: 422 with the reason as `message`, which PyGithub prints.
        await expectOnceThenDuplicate(t, calls, {
          collection: '/repos/acme/api/issues',
          title,
          tool: 'github.create_issue',
          key: ['acme', 'api', title],
          status: 422,
          error: 'GithubException',
        });
      });

      clientIt(
        'stripe',
        `stripe-python (${t}): once, then a duplicate it surfaces; trail = ledger`,
        async () => {
          const order = `stripe twice ${t}`;
          const calls = await runPythonClient('stripe_client.py', [base(t), caPem, order, 'twice'], env());
          // Stripe's dialect: 400 idempotency_error with Stripe-Should-Retry: false, so the library
          // (retrying 409s and 5xx on its own) raises its IdempotencyError and repeats nothing.
          await expectOnceThenDuplicate(t, calls, {
            collection: PAYMENT_INTENTS,
            title: order,
            tool: 'stripe.create_payment_intent',
            key: ['cus_agent', '500', 'usd', order],
            status: 400,
            error: 'IdempotencyError',
          });
        },
      );

      clientIt(
        'requests',
        `requests (${t}): the answer lost, urllib3's retry is held; one effect`,
        async () => {
          const title = `requests lost ${t}`;
          const collection = '/ledger/lost/entries';
          trackers[t].plan(collection, 'commit-then-destroy');
          const calls = await runPythonClient(
            'requests_client.py',
            [`${base(t)}${collection}`, title, 'retry'],
            env(),
          );
          // The gate answered the lost response 502 (sent_no_response); urllib3 retried it, and the
          // retry of an unknown outcome, with nothing to look it up by, waits for a person.
          expect(calls).toHaveLength(1);
          expect(calls[0]).toMatchObject({ status: 428, verdict: 'hold', error: 'HTTPError' });
          expect(calls[0]!.surfaced).toContain('approv');
          expect(trackers[t].posts(collection)).toHaveLength(1);
          expect(trackers[t].issues(collection)).toHaveLength(1);
          const report = await trailOf('ledger.create_entry', ['lost', title]);
          expect(report.operation).toMatchObject({ id: calls[0]!.operation, state: 'unknown' });
          expect(of(report, 'attempt').map((a) => a.dispatch_state)).toEqual(['sent_no_response']);
          expect(of(report, 'decision').map((d) => d.verdict)).toEqual(['allow', 'hold']);
        },
      );

      clientIt('httpx', `httpx (${t}): the answer lost, the agent's repeat is held; one effect`, async () => {
        // httpx repeats only a failed connection on its own, never a status: the gate's 502 is
        // raised with its reason (the effect may have happened), and it is the agent that repeats.
        const title = `httpx lost ${t}`;
        const collection = '/ledger/lost-httpx/entries';
        trackers[t].plan(collection, 'commit-then-destroy');
        const calls = await runPythonClient('httpx_client.py', [`${base(t)}${collection}`, title], env());
        expect(calls).toHaveLength(2);
        expect(calls[0]).toMatchObject({ status: 502, verdict: 'allow', error: 'HTTPStatusError' });
        expect(calls[0]!.surfaced).toContain('may or may not have happened');
        expect(calls[1]).toMatchObject({ status: 428, verdict: 'hold', error: 'HTTPStatusError' });
        expect(trackers[t].posts(collection)).toHaveLength(1);
        expect(trackers[t].issues(collection)).toHaveLength(1);
        const report = await trailOf('ledger.create_entry', ['lost-httpx', title]);
        expect(report.operation).toMatchObject({ id: calls[1]!.operation, state: 'unknown' });
        expect(of(report, 'attempt').map((a) => a.dispatch_state)).toEqual(['sent_no_response']);
        expect(of(report, 'decision').map((d) => d.verdict)).toEqual(['allow', 'hold']);
      });

      clientIt(
        'github',
        `PyGithub (${t}): the answer lost, its retry is looked up first; one issue`,
        async () => {
          const title = `PyGithub lost ${t}`;
          const collection = '/repos/acme/lost/issues';
          trackers[t].plan(collection, 'commit-then-destroy');
          const calls = await runPythonClient(
            'github_client.py',
            [base(t), 'acme/lost', title, 'retry'],
            env(),
          );
          // PyGithub's retry of the gate's 502 is looked up on the stand-in, found there, and
          // answered as a duplicate of the issue the lost attempt created.
          expect(calls).toHaveLength(1);
          expect(calls[0]).toMatchObject({ status: 422, verdict: 'duplicate', error: 'GithubException' });
          expect(trackers[t].posts(collection)).toHaveLength(1);
          const ledger = trackers[t].issues(collection);
          expect(ledger).toHaveLength(1);
          expect(calls[0]!.surfaced).toContain(ledger[0]!.html_url);
          const report = await trailOf('github.create_issue', ['acme', 'lost', title]);
          expect(report.operation).toMatchObject({ id: calls[0]!.operation, state: 'succeeded' });
          expect(of(report, 'attempt').map((a) => a.dispatch_state)).toEqual(['sent_no_response']);
          expect(of(report, 'decision').map((d) => d.verdict)).toEqual(['allow', 'duplicate']);
        },
      );

      clientIt(
        'stripe',
        `stripe-python (${t}): the answer lost, its retry is replayed; one payment`,
        async () => {
          const order = `stripe lost ${t}`;
          trackers[t].plan(PAYMENT_INTENTS, 'commit-then-destroy');
          const calls = await runPythonClient('stripe_client.py', [base(t), caPem, order, 'retry'], env());
          // stripe-python retried the gate's 502 itself; Stripe honors Idempotency-Key, so the gate
          // sent the retry at once with the key of the lost attempt (the library's own, kept:
          // policies/stripe.yaml agent_key: keep), and the stand-in replayed its result.
          expect(calls).toHaveLength(1);
          expect(calls[0]).toMatchObject({ status: 201, verdict: 'allow', error: null });
          const posts = trackers[t]
            .posts(PAYMENT_INTENTS)
            .filter((r) =>
              r.body.toString().includes(`description=${encodeURIComponent(order).replace(/%20/g, '+')}`),
            );
          expect(posts).toHaveLength(2);
          const keys = posts.map((r) => r.headers['idempotency-key']);
          expect(typeof keys[0]).toBe('string');
          expect(keys[1]).toBe(keys[0]);
          const ledger = trackers[t].issues(PAYMENT_INTENTS).filter((i) => i.title === order);
          expect(ledger).toHaveLength(1);
          expect(calls[0]!.body?.['html_url']).toBe(ledger[0]!.html_url);
          const report = await trailOf('stripe.create_payment_intent', ['cus_agent', '500', 'usd', order]);
          expect(report.operation).toMatchObject({ id: calls[0]!.operation, state: 'succeeded' });
          const attempts = of(report, 'attempt');
          expect(attempts.map((a) => a.dispatch_state)).toEqual(['sent_no_response', 'response_received']);
          expect(attempts[1]).toMatchObject({
            retry_decision: 'destination_idempotency_honored',
            replayed: true,
            idempotency_key: keys[0],
          });
        },
      );
    }
  });
}
