import { describe, expect, it } from 'vitest';
import { openStore, resolveStoreUrl } from '../../../src/store/index.js';

describe('resolveStoreUrl', () => {
  it('prefers the flag, then DATABASE_URL, then the embedded default', () => {
    const env = { DATABASE_URL: 'postgres://db/eg' };
    expect(resolveStoreUrl('pglite:/var/lib/eg', env)).toBe('pglite:/var/lib/eg');
    expect(resolveStoreUrl(undefined, env)).toBe('postgres://db/eg');
    expect(resolveStoreUrl(undefined, {})).toBe('pglite:./.effectgate');
    expect(resolveStoreUrl('', { DATABASE_URL: '' })).toBe('pglite:./.effectgate');
  });
});

describe('openStore URL validation', () => {
  it('rejects unknown schemes without echoing credentials', async () => {
    const err = await openStore({ url: 'mysql://root:hunter2@db/eg' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'EG_ERR_CONFIG_INVALID' });
    expect((err as Error).message).not.toContain('hunter2');
    await expect(openStore({ url: 'pglite:' })).rejects.toMatchObject({ code: 'EG_ERR_CONFIG_INVALID' });
  });
});
