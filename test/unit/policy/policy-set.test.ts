import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadPolicies, parsePolicyFiles, type Tool } from '../../../src/policy/index.js';
import { BASE_TOOL, baseWith, EXAMPLE_POLICIES, fixture, lines } from './policy-test-helpers.js';

describe('policy set', () => {
  it('applies every default', () => {
    const set = parsePolicyFiles([{ file: 'p.yaml', text: lines(...BASE_TOOL) }]);
    expect(set.default).toBe('allow');
    expect(set.loopBreaker).toEqual({ maxDuplicateSkips: 3 });
    expect(set.files).toEqual(['p.yaml']);
    const tool = set.tools[0]!;
    expect(tool).toMatchObject({
      id: 't',
      source: { file: 'p.yaml', line: 3 },
      effect: 'create',
      dedupe: null,
      idempotency: null,
      retry: { budget: 3 },
      response: { ref: null, replayedHeader: null },
      redact: [],
      fingerprintIgnore: [],
      reconcile: null,
      verdict: { protocol: 'http' },
    });
    expect(tool.outcome.succeeded).toEqual([{ kind: 'class', hundreds: 2 }]);
    expect(tool.outcome.failed).toEqual([{ kind: 'class', hundreds: 4 }]);
    expect(tool.outcome.unknown).toEqual([{ kind: 'class', hundreds: 5 }]);
  });

  it('defaults the optional parts of dedupe, idempotency and reconcile', () => {
    const set = parsePolicyFiles([
      {
        file: 'p.yaml',
        text: baseWith(
          '    dedupe: { key: [$.path.id], window: permanent }',
          '    idempotency: {}',
          '    reconcile: { path: "/items/{id}", match: { $.id: $.path.id } }',
          '    response: { replayed_header: Idempotent-Replayed }',
        ),
      },
    ]);
    const tool = set.tools[0]!;
    expect(tool.dedupe).toMatchObject({
      windowMs: null,
      pendingTtlMs: 120_000,
      waitMs: 2_000,
      onMissing: 'block',
    });
    expect(tool.dedupe!.key.map((k) => k.expression)).toEqual(['$.path.id']);
    expect(tool.idempotency).toEqual({
      header: 'Idempotency-Key',
      body: null,
      format: 'token',
      maxLength: null,
      retentionMs: null,
      agentKey: 'keep',
      honored: false,
    });
    expect(tool.reconcile).toMatchObject({ method: 'GET', path: '/items/{id}' });
    expect(tool.reconcile!.items.evaluate([{ id: 1 }, { id: 2 }])).toEqual([{ id: 1 }, { id: 2 }]);
    expect(tool.response.replayedHeader).toBe('idempotent-replayed');
  });

  it('deep-freezes everything it returns', () => {
    const set = parsePolicyFiles([
      {
        file: 'p.yaml',
        text: baseWith('    dedupe: { key: [$.path.id], window: 1h }', '    redact: [$.body.token]'),
      },
    ]);
    const tool = set.tools[0]!;
    for (const value of [
      set,
      set.tools,
      set.files,
      set.loopBreaker,
      tool,
      tool.source,
      tool.retry,
      tool.dedupe,
      tool.dedupe!.key,
      tool.dedupe!.key[0],
      tool.redact,
      tool.outcome,
      tool.outcome.succeeded[0],
      tool.match,
      tool.verdict,
      tool.response,
    ]) {
      expect(Object.isFrozen(value)).toBe(true);
    }
    expect(() => {
      (set as { default: string }).default = 'block';
    }).toThrow(TypeError);
    expect(() => {
      (set.tools as unknown[]).push({});
    }).toThrow(TypeError);
    expect(() => {
      (tool.retry as { budget: number }).budget = 99;
    }).toThrow(TypeError);
    expect(tool.retry.budget).toBe(3);
  });

  it('loads the shipped example policies folder', async () => {
    const set = await loadPolicies(EXAMPLE_POLICIES);
    expect(set.files).toEqual(
      [
        'example-tracker.yaml',
        'github.yaml',
        'jira.yaml',
        'kubernetes.yaml',
        'linear.yaml',
        'mcp.yaml',
        'okta.yaml',
        'pagerduty.yaml',
        'slack.yaml',
        'stripe.yaml',
      ].map((f) => join(EXAMPLE_POLICIES, f)),
    );
    expect(set.default).toBe('allow');
    expect(set.loopBreaker.maxDuplicateSkips).toBe(3);
    expect(set.tools.map((t) => t.id)).toEqual([
      'example.create_issue',
      'github.create_issue',
      'github.create_issue_comment',
      'github.create_pull_request',
      'github.transfer_repository',
      'jira.create_issue',
      'kubernetes.patch_deployment',
      'linear.issue_create',
      'mcp.create_ticket',
      'okta.deactivate_user',
      'pagerduty.enqueue_event',
      'slack.post_message',
      'stripe.create_payment_intent',
      'stripe.create_refund',
    ]);
    const byId = (id: string): Tool => set.tools.find((t) => t.id === id)!;
    // The README's example destination: one port of loopback, nothing else.
    expect(byId('example.create_issue').match.explain()).toBe(
      'POST 127.0.0.1:9090 /repos/{owner}/{repo}/issues',
    );

    const gh = byId('github.create_issue');
    expect(gh.effect).toBe('create');
    expect(gh.dedupe).toMatchObject({
      windowMs: 86_400_000,
      pendingTtlMs: 120_000,
      waitMs: 2_000,
      onMissing: 'block',
    });
    expect(gh.dedupe!.key.map((k) => k.expression)).toEqual(['$.path.owner', '$.path.repo', '$.body.title']);
    expect(gh.idempotency).toMatchObject({
      header: 'Idempotency-Key',
      body: null,
      agentKey: 'keep',
      honored: false,
    });
    expect(gh.retry.budget).toBe(3);
    expect(gh.response.ref?.expression).toBe('$.html_url');
    expect(gh.redact.map((p) => p.expression)).toEqual(['$.body.token']);
    expect(gh.fingerprintIgnore.map((p) => p.expression)).toEqual(['$.body.trace_id', '$.body.timestamp']);
    expect(gh.reconcile).toMatchObject({ method: 'GET', path: '/repos/{owner}/{repo}/issues?state=all' });
    expect(gh.reconcile!.items.expression).toBe('$[*]');
    expect(gh.reconcile!.match.map((m) => [m.remote.expression, m.argument.expression])).toEqual([
      ['$.title', '$.body.title'],
    ]);
    expect(gh.verdict.protocol).toBe('github');

    const mcp = byId('mcp.create_ticket');
    expect(mcp.match.hasBodyConditions).toBe(true);
    expect(mcp.dedupe!.windowMs).toBe(3_600_000);
    expect(mcp.verdict.protocol).toBe('jsonrpc');

    // The library's choices its header comments explain.
    expect(byId('stripe.create_payment_intent').idempotency).toEqual({
      header: 'Idempotency-Key',
      body: null,
      format: 'token',
      maxLength: 255,
      retentionMs: 86_400_000,
      agentKey: 'keep',
      honored: true,
    });
    expect(byId('pagerduty.enqueue_event').idempotency).toMatchObject({
      header: null,
      body: { path: '$.dedup_key' },
      agentKey: 'keep',
      honored: false,
    });
    expect(byId('stripe.create_payment_intent').response.replayedHeader).toBe('idempotent-replayed');
    expect(byId('slack.post_message').dedupe!.windowMs).toBe(600_000);
    expect(byId('okta.deactivate_user').dedupe!.windowMs).toBeNull();
    expect(byId('kubernetes.patch_deployment').dedupe).toBeNull();
    expect(byId('pagerduty.enqueue_event').dedupe!.key.map((k) => k.expression)).toEqual([
      '$.body.dedup_key',
      '$.body.event_action',
    ]);
  });

  it('loads a folder sorted by name, .yaml and .yml, not recursively', async () => {
    const dir = fixture('folder');
    const set = await loadPolicies(dir);
    expect(set.files).toEqual([join(dir, '10-status.yaml'), join(dir, '20-tickets.yml')]);
    expect(set.tools.map((t) => t.id)).toEqual(['status.post', 'tickets.create']);
    // One file says block, the other says nothing: the explicit setting holds.
    expect(set.default).toBe('block');
  });

  it('loads a single file', async () => {
    const set = await loadPolicies(fixture('routes.yaml'));
    expect(set.files).toEqual([fixture('routes.yaml')]);
    expect(set.tools).toHaveLength(6);
  });
});
