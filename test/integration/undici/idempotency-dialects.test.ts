/**
 * Idempotency dialects end to end: real undici clients through the gate interceptor, a real store
 * (PGlite, and PostgreSQL when DATABASE_URL is set), and a stand-in that keeps a ledger keyed by
 * the idempotency key as Stripe does (test/helpers/idempotent-ledger.ts). What the stand-in
 * created is compared with what the trail says was sent.
 */
import { Agent, type Dispatcher, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencySummary, loadOperationReport } from '../../../src/admin/index.js';
import { gateIdempotencyKey } from '../../../src/engine/idempotency-key.js';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { type IdempotentLedger, startIdempotentLedger } from '../../helpers/idempotent-ledger.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const JSON_TYPE = { 'content-type': 'application/json' };

const policies = parsePolicyFiles([
  {
    file: 'dialects.yaml',
    text: `
version: 1
tools:
  - id: pay.keep
    match: { hosts: [127.0.0.1], method: POST, path: /v1/payment_intents }
    effect: financial
    dedupe: { key: [$.body.customer, $.body.amount, $.body.description], window: 1h, wait: 0s }
    idempotency: { header: Idempotency-Key, max_length: 255, retention: 24h, agent_key: keep, honored: true }
  - id: pay.replace
    match: { hosts: [127.0.0.1], method: POST, path: /v1/charges }
    effect: financial
    dedupe: { key: [$.body.customer, $.body.amount, $.body.description], window: 1h, wait: 0s }
    idempotency: { header: Idempotency-Key, agent_key: replace, honored: true }
  - id: pay.quoted
    match: { hosts: [127.0.0.1], method: POST, path: /v1/quoted }
    effect: financial
    dedupe: { key: [$.body.description], window: 1h, wait: 0s }
    idempotency: { format: sf-string, agent_key: require }
  - id: pay.short_memory
    match: { hosts: [127.0.0.1], method: POST, path: /v1/refunds }
    effect: financial
    dedupe: { key: [$.body.payment_intent], window: 1h, wait: 0s }
    idempotency: { retention: 1ms, honored: true }
  - id: events
    match: { hosts: [127.0.0.1], method: POST, path: /v2/enqueue }
    effect: notify
    dedupe: { key: [$.body.payload.summary], window: 1h, wait: 0s }
    idempotency: { body: $.dedup_key, max_length: 16, agent_key: replace }
  - id: form.events
    match: { hosts: [127.0.0.1], method: POST, path: /v1/form_events }
    effect: notify
    dedupe: { key: [$.body.summary], window: 1h, wait: 0s }
    idempotency: { body: $.dedup_key, agent_key: replace }
`,
  },
]);

for (const target of storeTargets()) {
  describe(`idempotency dialects through the interceptor (${target.name})`, () => {
    let store: TestStore;
    let gate: Gate;
    let ledger: IdempotentLedger;
    const agent = new Agent();
    const inRun = (run: string): Dispatcher => agent.compose(gateInterceptor(gate, { run }));

    beforeAll(async () => {
      store = await openTestStore(target);
      gate = await createGate({ policies, store, scope: { tenant: 'acme', area: 'pay', agent: 'bot' } });
      ledger = await startIdempotentLedger();
    });

    afterAll(async () => {
      await agent.close();
      await gate?.close();
      await ledger?.close();
      await store?.close();
    });

    const post = async (run: string, path: string, body: string, headers: Record<string, string>) => {
      const res = await request(`${ledger.url}${path}`, {
        dispatcher: inRun(run),
        method: 'POST',
        headers,
        body,
      });
      const text = await res.body.text();
      return {
        status: res.statusCode,
        headers: res.headers,
        text,
        operation: res.headers['effectgate-operation'] as string,
      };
    };
    const attemptsOf = async (operation: string) => {
      const report = await loadOperationReport(store, operation);
      return report!.trail.timeline.filter((e) => e.type === 'attempt');
    };

    it("keeps the agent's key: its reuse with another amount is refused by the destination, and the trail records both keys", async () => {
      const first = await post('keep-1', '/v1/payment_intents', 'customer=c1&amount=100&description=o1', {
        ...FORM,
        'idempotency-key': 'sdk-key-1',
      });
      expect(first.status).toBe(200);
      const second = await post('keep-1', '/v1/payment_intents', 'customer=c1&amount=200&description=o1', {
        ...FORM,
        'idempotency-key': 'sdk-key-1',
      });
      // Another amount is another operation to the gate; the destination sees the reused key.
      expect(second.status).toBe(400);
      expect(JSON.parse(second.text)).toMatchObject({ error: { type: 'idempotency_error' } });
      expect(ledger.created.filter((c) => c.key === 'sdk-key-1')).toHaveLength(1);
      expect(ledger.seen.filter((s) => s.key === 'sdk-key-1').map((s) => s.result)).toEqual([
        'created',
        'refused',
      ]);

      const [attempt] = await attemptsOf(second.operation);
      expect(attempt).toMatchObject({
        idempotency_key: 'sdk-key-1',
        agent_idempotency_key: 'sdk-key-1',
        gate_idempotency_key: second.operation,
        status: 400,
      });
    });

    it("replaces the agent's key under agent_key: replace: one key per operation, the agent's recorded beside it", async () => {
      const first = await post('replace-1', '/v1/charges', 'customer=c2&amount=100&description=o2', {
        ...FORM,
        'idempotency-key': 'sdk-key-2',
      });
      const second = await post('replace-1', '/v1/charges', 'customer=c2&amount=200&description=o2', {
        ...FORM,
        'idempotency-key': 'sdk-key-2',
      });
      expect([first.status, second.status]).toEqual([200, 200]);
      // What the agent risked by reusing its key is now two payments: each operation its own key.
      const sent = ledger.created.filter((c) => c.key === first.operation || c.key === second.operation);
      expect(sent).toHaveLength(2);
      const [attempt] = await attemptsOf(second.operation);
      expect(attempt).toMatchObject({
        idempotency_key: second.operation,
        agent_idempotency_key: 'sdk-key-2',
        gate_idempotency_key: second.operation,
      });
    });

    it('retries an unknown outcome with the key of the attempt before, and records the replay', async () => {
      ledger.dropNextResponse();
      const body = 'customer=c3&amount=300&description=o3';
      const lost = await post('unknown-1', '/v1/payment_intents', body, {
        ...FORM,
        'idempotency-key': 'sdk-key-3',
      });
      expect(lost.status).toBe(502);
      // The SDK makes a new key for a new call; the destination can only deduplicate the old one.
      const retried = await post('unknown-1', '/v1/payment_intents', body, {
        ...FORM,
        'idempotency-key': 'sdk-key-4',
      });
      expect(retried.status).toBe(200);
      expect(retried.headers['idempotent-replayed']).toBe('true');
      expect(retried.operation).toBe(lost.operation);
      expect(ledger.created.filter((c) => c.params === body)).toHaveLength(1);
      expect(
        ledger.seen.filter((s) => s.request.body.toString() === body).map((s) => [s.key, s.result]),
      ).toEqual([
        ['sdk-key-3', 'created'],
        ['sdk-key-3', 'replayed'],
      ]);
      const attempts = await attemptsOf(lost.operation);
      // A webhook names the key the destination saw: it finds the operation; its id it never saw.
      expect((await store.findOperations({ idempotencyKey: 'sdk-key-3' })).map((o) => o.id)).toEqual([
        lost.operation,
      ]);
      expect(await store.findOperations({ idempotencyKey: 'sdk-key-4' })).toEqual([]);
      expect(await store.findOperations({ idempotencyKey: lost.operation })).toEqual([]);
      expect(attempts.map((a) => idempotencySummary(a as never))).toEqual([
        `idempotency key sdk-key-3 (the agent's own); the gate's key ${lost.operation}`,
        `idempotency key sdk-key-3 (the key of the attempt before); the agent sent sdk-key-4; the gate's key ${lost.operation}; REPLAYED by the destination`,
      ]);
      expect(attempts).toMatchObject([
        { idempotency_key: 'sdk-key-3', agent_idempotency_key: 'sdk-key-3', replayed: null },
        {
          idempotency_key: 'sdk-key-3',
          agent_idempotency_key: 'sdk-key-4',
          retry_decision: 'destination_idempotency_honored',
          replayed: true,
        },
      ]);
    });

    it('holds the retry of an unknown outcome once the destination has forgotten the key (retention)', async () => {
      ledger.dropNextResponse();
      const body = 'payment_intent=pi_9&amount=50';
      const lost = await post('retention-1', '/v1/refunds', body, FORM);
      expect(lost.status).toBe(502);
      // retention: 1ms, so the key is past it by the time the next proposal comes.
      await new Promise((resolve) => setTimeout(resolve, 20));
      const retried = await post('retention-1', '/v1/refunds', body, FORM);
      expect(retried.status).toBe(428);
      expect(retried.headers['effectgate-verdict']).toBe('hold');
      expect(ledger.created.filter((c) => c.params === body)).toHaveLength(1);
      expect(ledger.seen.filter((s) => s.request.body.toString() === body)).toHaveLength(1);
    });

    it('sends an sf-string key and refuses a request without its own key under agent_key: require', async () => {
      const missing = await post('quoted-1', '/v1/quoted', 'description=o5', FORM);
      expect(missing.status).toBe(422);
      expect(JSON.parse(missing.text)).toMatchObject({ code: 'EG_ERR_IDEMPOTENCY_KEY' });
      const sent = await post('quoted-1', '/v1/quoted', 'description=o5', {
        ...FORM,
        'idempotency-key': '"k-5"',
      });
      expect(sent.status).toBe(200);
      const seen = ledger.seen.filter((s) => s.request.url === '/v1/quoted');
      expect(seen.map((s) => s.request.headers['idempotency-key'])).toEqual(['"k-5"']);
      const [attempt] = await attemptsOf(sent.operation);
      expect(attempt).toMatchObject({ idempotency_key: 'k-5', agent_idempotency_key: 'k-5' });
    });

    it('splices a body key into the JSON bytes, every other byte kept, shortened by max_length', async () => {
      const body =
        '{ "routing_key": "R1", "event_action": "trigger",\n  "payload": { "summary": "disk full ✓" } }';
      const sent = await post('events-1', '/v2/enqueue', body, JSON_TYPE);
      expect(sent.status).toBe(202);
      const key = gateIdempotencyKey(sent.operation, 16);
      expect(key).toHaveLength(16);
      const received = ledger.seen.filter((s) => s.request.url === '/v2/enqueue');
      expect(received).toHaveLength(1);
      expect(received[0]!.request.body.toString('utf8')).toBe(
        `{ "routing_key": "R1", "event_action": "trigger",\n  "payload": { "summary": "disk full ✓" },"dedup_key":"${key}" }`,
      );
      expect(received[0]!.key).toBe(key);
      const [attempt] = await attemptsOf(sent.operation);
      expect(attempt).toMatchObject({
        idempotency_key: key,
        gate_idempotency_key: key,
        agent_idempotency_key: null,
      });
      expect((await store.findOperations({ idempotencyKey: key })).map((o) => o.id)).toEqual([
        sent.operation,
      ]);
      // The same event again, now carrying the key itself: answered from the first, nothing sent.
      const again = await post(
        'events-1',
        '/v2/enqueue',
        `${body.slice(0, -1)}, "dedup_key": "${key}" }`,
        JSON_TYPE,
      );
      expect(again.status).toBe(409);
      expect(ledger.seen.filter((s) => s.request.url === '/v2/enqueue')).toHaveLength(1);
    });

    it('refuses an agent key too long to record where it would be sent, and a repeated key header; cuts a replaced one', async () => {
      const long = 'k'.repeat(300);
      const kept = await post('long-1', '/v1/payment_intents', 'customer=c6&amount=1&description=o6', {
        ...FORM,
        'idempotency-key': long,
      });
      expect(kept.status).toBe(422);
      expect(JSON.parse(kept.text)).toMatchObject({ code: 'EG_ERR_IDEMPOTENCY_KEY' });
      const twice = await request(`${ledger.url}/v1/payment_intents`, {
        dispatcher: inRun('long-1'),
        method: 'POST',
        headers: ['content-type', FORM['content-type'], 'idempotency-key', 'a', 'idempotency-key', 'b'],
        body: 'customer=c6&amount=2&description=o6',
      });
      expect(twice.statusCode).toBe(422);
      await twice.body.text();
      expect(ledger.seen.filter((s) => s.request.body.toString().includes('description=o6'))).toHaveLength(0);

      const replaced = await post('long-1', '/v1/charges', 'customer=c6&amount=3&description=o6', {
        ...FORM,
        'idempotency-key': long,
      });
      expect(replaced.status).toBe(200);
      const [attempt] = await attemptsOf(replaced.operation);
      expect(attempt).toMatchObject({
        idempotency_key: replaced.operation,
        agent_idempotency_key: 'k'.repeat(255),
      });
    });

    it('sets a body key in a form body, the other fields byte for byte', async () => {
      const body = 'summary=disk+full&routing_key=R%2F1&dedup_key=agent-chose';
      const sent = await post('form-1', '/v1/form_events', body, FORM);
      expect(sent.status).toBe(200);
      const received = ledger.seen.filter((s) => s.request.url === '/v1/form_events');
      expect(received.map((s) => s.request.body.toString())).toEqual([
        `summary=disk+full&routing_key=R%2F1&dedup_key=${sent.operation}`,
      ]);
      const [attempt] = await attemptsOf(sent.operation);
      expect(attempt).toMatchObject({
        idempotency_key: sent.operation,
        agent_idempotency_key: 'agent-chose',
      });
    });
  });
}
