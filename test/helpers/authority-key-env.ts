/**
 * The suite's authority key on PostgreSQL (a vitest setup file). A gate on PostgreSQL refuses to
 * start without a key from outside the database (src/engine/authority-key.ts): every replica of a
 * deployment gets the same one, from one Secret. A run with DATABASE_URL set is such a deployment,
 * so its gates, in process and spawned (a child inherits the environment), get this key through
 * EFFECTGATE_AUTHORITY_KEY. A run without DATABASE_URL keeps the defaults (a key file beside an
 * embedded store); tests of the defaults themselves clear the variable.
 */
export const TEST_AUTHORITY_KEY = 'effectgate-test-suite-authority-key-0123456789';

if (process.env['DATABASE_URL'] && process.env['EFFECTGATE_AUTHORITY_KEY'] === undefined) {
  process.env['EFFECTGATE_AUTHORITY_KEY'] = TEST_AUTHORITY_KEY;
}
