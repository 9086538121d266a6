import type { Migration, MigrationProvider } from 'kysely';
import { migration0001 } from './0001-initial/index.js';
import { migration0002 } from './0002-unknown-outcomes/index.js';
import { migration0003 } from './0003-lost-outcomes/index.js';
import { migration0004 } from './0004-input-continuations/index.js';
import { migration0005 } from './0005-chain-append/index.js';
import { migration0006 } from './0006-event-retention/index.js';
import { migration0007 } from './0007-observations-from-outside/index.js';
import { migration0008 } from './0008-session-grants/index.js';
import { migration0009 } from './0009-run-halts/index.js';
import { migration0010 } from './0010-shadow-mode/index.js';
import { migration0011 } from './0011-approval-fingerprints/index.js';
import { migration0012 } from './0012-answer-outcomes/index.js';
import { migration0013 } from './0013-idempotency-dialects/index.js';
import { migration0014 } from './0014-call-repeats/index.js';
import { migration0015 } from './0015-accepted-operations/index.js';
import { migration0017 } from './0017-attempt-key-index/index.js';
import { migration0018 } from './0018-audit-checkpoints/index.js';
import { migration0019 } from './0019-decision-projection/index.js';
import { migration0020 } from './0020-kept-outcomes/index.js';
import { migration0021 } from './0021-operation-state/index.js';
import { migration0022 } from './0022-lost-attempt-on-key/index.js';
import { migration0023 } from './0023-row-projection/index.js';
import { migration0024 } from './0024-event-order/index.js';
import { migration0025 } from './0025-projection-by-snapshot/index.js';
import { migration0026 } from './0026-sealing-by-snapshot/index.js';
import { migration0027 } from './0027-events-by-position/index.js';

/*
 * Schema migrations, one folder each. Listed in code, not discovered on disk, so they work
 * unchanged from dist/ and from a bundled CLI. Names sort in apply order and are what
 * kysely_migration recorded: never rename, edit or delete an applied one (migrations.lock.json
 * holds each folder's checksum and a test compares), add a new one.
 *
 * Functions are not migrations: their current definitions are in ../functions/, applied after
 * these by KyselyStore.migrate().
 */
const MIGRATIONS: Readonly<Record<string, Migration>> = {
  '0001-initial': migration0001,
  '0002-unknown-outcomes': migration0002,
  '0003-lost-outcomes': migration0003,
  '0004-input-continuations': migration0004,
  '0005-chain-append': migration0005,
  '0006-event-retention': migration0006,
  '0007-observations-from-outside': migration0007,
  '0008-session-grants': migration0008,
  '0009-run-halts': migration0009,
  '0010-shadow-mode': migration0010,
  '0011-approval-fingerprints': migration0011,
  '0012-answer-outcomes': migration0012,
  '0013-idempotency-dialects': migration0013,
  '0014-call-repeats': migration0014,
  '0015-accepted-operations': migration0015,
  '0017-attempt-key-index': migration0017,
  '0018-audit-checkpoints': migration0018,
  '0019-decision-projection': migration0019,
  '0020-kept-outcomes': migration0020,
  '0021-operation-state': migration0021,
  '0022-lost-attempt-on-key': migration0022,
  '0023-row-projection': migration0023,
  '0024-event-order': migration0024,
  '0025-projection-by-snapshot': migration0025,
  '0026-sealing-by-snapshot': migration0026,
  '0027-events-by-position': migration0027,
};

export const migrationProvider: MigrationProvider = {
  async getMigrations(): Promise<Record<string, Migration>> {
    return { ...MIGRATIONS };
  },
};
