import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkAdminAuth, resolveAdminToken } from '../../../src/admin/admin-auth.js';
import {
  InputError,
  parseApprovalDecision,
  parseApprovalTtl,
  parseLimit,
  parseOperationFilter,
  parsePositiveDuration,
  parseSince,
} from '../../../src/admin/admin-input.js';

const now = new Date('2025-06-01T12:00:00.000Z');

describe('operation filters', () => {
  it('parses every filter and defaults the limit to 100', () => {
    expect(parseOperationFilter({}, undefined, now)).toEqual({ limit: 100 });
    expect(
      parseOperationFilter(
        { state: 'unknown', tool: 'github.create_issue', tenant: 'acme', since: '24h', limit: '5' },
        undefined,
        now,
      ),
    ).toEqual({
      state: 'unknown',
      toolId: 'github.create_issue',
      tenant: 'acme',
      since: '2025-05-31T12:00:00.000Z',
      limit: 5,
    });
  });

  it('names the flag in its refusals', () => {
    expect(() => parseOperationFilter({ state: 'done' }, (f) => `--${f}`)).toThrow(/^--state must be one of/);
    expect(() => parseOperationFilter({ tool: '' }, (f) => `--${f}`)).toThrow(InputError);
  });

  it('limit is an integer from 1 to 1000 in plain digits', () => {
    expect(parseLimit('limit', '1')).toBe(1);
    expect(parseLimit('limit', '1000')).toBe(1000);
    for (const bad of ['0', '1001', '-1', '1e3', '1.5', ' 5', '', '0x10', '99999999']) {
      expect(() => parseLimit('limit', bad), bad).toThrow(/1 to 1000/);
    }
  });

  it('since is a duration back from now or an ISO 8601 time', () => {
    expect(parseSince('since', '90s', now)).toBe('2025-06-01T11:58:30.000Z');
    expect(parseSince('since', '7d', now)).toBe('2025-05-25T12:00:00.000Z');
    expect(parseSince('since', '2025-05-01', now)).toBe('2025-05-01T00:00:00.000Z');
    expect(parseSince('since', '2024-02-29', now)).toBe('2024-02-29T00:00:00.000Z');
    expect(parseSince('since', '2025-05-01T10:00:00+02:00', now)).toBe('2025-05-01T08:00:00.000Z');
    for (const bad of [
      'yesterday',
      'permanent',
      '1h30m',
      '2025-02-30',
      '2025-04-31',
      '2025-13-01',
      '2025-06-01T10:00',
      '',
    ]) {
      expect(() => parseSince('since', bad, now), bad).toThrow(InputError);
    }
  });
});

describe('approval decisions', () => {
  it('approve defaults ttl to 1h; permanent means no expiry', () => {
    expect(parseApprovalDecision('ap-1', 'approve', { by: ' alice ', reason: 'ok' })).toEqual({
      approvalId: 'ap-1',
      action: 'approve',
      by: 'alice',
      reason: 'ok',
      ttlMs: 3_600_000,
    });
    expect(parseApprovalTtl('ttl', 'permanent')).toBeNull();
    expect(parseApprovalTtl('ttl', '30m')).toBe(1_800_000);
    expect(() => parseApprovalTtl('ttl', '0s')).toThrow(/longer than 0/);
  });

  it('deny and revoke take no ttl', () => {
    expect(parseApprovalDecision('ap-1', 'deny', { by: 'bob', reason: 'no' })).toEqual({
      approvalId: 'ap-1',
      action: 'deny',
      by: 'bob',
      reason: 'no',
    });
    expect(() => parseApprovalDecision('ap-1', 'revoke', { by: 'bob', reason: 'no', ttl: '1h' })).toThrow(
      /only to approve/,
    );
  });

  it('by is 1..200 characters, reason 1..2000, without control characters', () => {
    const ok = { by: 'alice', reason: 'ok' };
    expect(() => parseApprovalDecision('a', 'deny', { ...ok, by: 'b'.repeat(200) })).not.toThrow();
    expect(() => parseApprovalDecision('a', 'deny', { ...ok, by: 'b'.repeat(201) })).toThrow(/200/);
    expect(() => parseApprovalDecision('a', 'deny', { ...ok, by: undefined })).toThrow(/by/);
    expect(() => parseApprovalDecision('a', 'deny', { ...ok, by: 'a\u001b[31m' })).toThrow(/control/);
    expect(() => parseApprovalDecision('a', 'deny', { ...ok, reason: 'r'.repeat(2000) })).not.toThrow();
    expect(() => parseApprovalDecision('a', 'deny', { ...ok, reason: 'r'.repeat(2001) })).toThrow(/2000/);
    expect(() => parseApprovalDecision('a', 'deny', { ...ok, reason: 'two\nlines\tok' })).not.toThrow();
    expect(() => parseApprovalDecision('a', 'deny', { ...ok, reason: 'bell\u0007' })).toThrow(/control/);
  });

  it('stale-after is a positive duration', () => {
    expect(parsePositiveDuration('--stale-after', '30s')).toBe(30_000);
    for (const bad of ['0s', 'permanent', 'soon']) {
      expect(() => parsePositiveDuration('--stale-after', bad), bad).toThrow(/--stale-after/);
    }
  });
});

describe('admin bearer authentication', () => {
  const token = 'tok-9f8e7d6c5b4a';

  it('accepts exactly the configured token', () => {
    expect(checkAdminAuth(`Bearer ${token}`, token)).toBe('ok');
    expect(checkAdminAuth(`bearer ${token}`, token)).toBe('ok');
    expect(checkAdminAuth(`Bearer ${token}x`, token)).toBe('wrong');
    expect(checkAdminAuth('Bearer x', token)).toBe('wrong');
    expect(checkAdminAuth(`Basic ${token}`, token)).toBe('missing');
    expect(checkAdminAuth(undefined, token)).toBe('missing');
    expect(checkAdminAuth(`Bearer ${token}`, null)).toBe('unconfigured');
    expect(checkAdminAuth(`Bearer ${token}`, '')).toBe('unconfigured');
  });

  const dir = mkdtempSync(join(tmpdir(), 'effectgate-admin-token-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads the token from --admin-token-file before EFFECTGATE_ADMIN_TOKEN', async () => {
    const file = join(dir, 'token');
    writeFileSync(file, `${token}\n`);
    expect(await resolveAdminToken({ file, env: { EFFECTGATE_ADMIN_TOKEN: 'other' } })).toBe(token);
    expect(await resolveAdminToken({ env: { EFFECTGATE_ADMIN_TOKEN: ` ${token} ` } })).toBe(token);
    expect(await resolveAdminToken({ env: {} })).toBeNull();
  });

  it('refuses an unreadable or empty token file without printing its content', async () => {
    await expect(resolveAdminToken({ file: join(dir, 'missing'), env: {} })).rejects.toMatchObject({
      code: 'EG_ERR_CONFIG_INVALID',
    });
    const empty = join(dir, 'empty');
    writeFileSync(empty, '\n');
    await expect(resolveAdminToken({ file: empty, env: {} })).rejects.toMatchObject({
      code: 'EG_ERR_CONFIG_INVALID',
    });
    const spaced = join(dir, 'spaced');
    writeFileSync(spaced, 'has a space-secret\n');
    const err = await resolveAdminToken({ file: spaced, env: {} }).catch((e: Error) => e);
    expect(String((err as Error).message)).not.toContain('space-secret');
  });
});
