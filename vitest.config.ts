import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration suites open real PGlite and PostgreSQL stores; two cores here.
    pool: 'forks',
    maxWorkers: 2,
    // The gate resolves the host names its policies govern (to recognise their addresses); the
    // suite sends no DNS query off this machine, so only localhost is resolved (RFC 6761).
    env: { EFFECTGATE_RESOLVE_GOVERNED_HOSTS: 'loopback' },
    // On PostgreSQL every gate needs an authority key from outside the database: the helper says why.
    setupFiles: ['test/helpers/authority-key-env.ts'],
  },
});
