import { describe, expect, it } from 'vitest';
import { parseProcLimits } from '../../../src/proxy/descriptor-limit.js';
import { DEFAULT_PROXY_LIMITS, DESCRIPTOR_RESERVE, resolveLimits } from '../../../src/proxy/proxy-limits.js';

const PROC_LIMITS = [
  'Limit                     Soft Limit           Hard Limit           Units     ',
  'Max processes             unlimited            unlimited            processes ',
  'Max open files            256                  4096                 files     ',
  '',
].join('\n');

describe('resolveLimits under a descriptor limit', () => {
  it('keeps the configured caps when none is known or they fit', () => {
    expect(resolveLimits({}, null)).toEqual(DEFAULT_PROXY_LIMITS);
    expect(resolveLimits({}, 1_048_576)).toEqual(DEFAULT_PROXY_LIMITS);
    const set = { maxConnections: 4096, maxConnectionsPerClient: 10 };
    expect(resolveLimits(set, 1_048_576)).toMatchObject(set);
  });

  it('fits the total under half what the reserve leaves, and the default per-client cap in proportion', () => {
    const limits = resolveLimits({}, 256);
    expect(limits.maxConnections).toBe(Math.floor((256 - DESCRIPTOR_RESERVE) / 2));
    expect(limits.maxConnectionsPerClient).toBe(limits.maxConnections / 4);
    expect(Object.isFrozen(limits)).toBe(true);
  });

  it('keeps a per-client cap that was set while it fits under the total', () => {
    expect(resolveLimits({ maxConnectionsPerClient: 10 }, 256).maxConnectionsPerClient).toBe(10);
    expect(resolveLimits({ maxConnectionsPerClient: 500 }, 256).maxConnectionsPerClient).toBe(64);
  });

  it('never lowers a cap to 0, however small the limit', () => {
    expect(resolveLimits({}, 16)).toMatchObject({ maxConnections: 1, maxConnectionsPerClient: 1 });
  });
});

describe('parseProcLimits', () => {
  it('reads the soft open-file limit', () => {
    expect(parseProcLimits(PROC_LIMITS)).toBe(256);
  });

  it('says nothing for an unlimited or missing row', () => {
    expect(parseProcLimits(PROC_LIMITS.replace('256  ', 'unlimited'))).toBeNull();
    expect(parseProcLimits('Limit Soft Limit\n')).toBeNull();
  });
});
