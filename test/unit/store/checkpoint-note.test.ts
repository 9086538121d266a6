import { describe, expect, it } from 'vitest';
import { checkpointNote, checkpointOrigin, readCheckpointNote } from '../../../src/store/checkpoint-note.js';
import { generateNoteKey, parseVerifierKey, SignedNoteError } from '../../../src/store/signed-note.js';
import { testAuditKey } from '../../helpers/audit-keys.js';

const { signer, verifier } = testAuditKey('effectgate-audit-unit');
const ROOT = 'ab'.repeat(32);

describe('checkpoint notes', () => {
  it('are C2SP checkpoints: origin naming the log, size, base64 root, a sealed line, one signature', () => {
    const note = checkpointNote(signer, 'log-1', 42, ROOT, '2026-12-05T12:00:00.000Z');
    const [body, signature] = note.split('\n\n');
    expect(body).toBe(
      `effectgate/audit/log-1\n42\n${Buffer.from(ROOT, 'hex').toString('base64')}\nsealed 2026-12-05T12:00:00.000Z`,
    );
    expect(signature).toMatch(/^\u2014 effectgate-audit-unit [A-Za-z0-9+/=]+\n$/);
    expect(readCheckpointNote(note, [verifier])).toEqual({
      origin: checkpointOrigin('log-1'),
      size: 42,
      rootHex: ROOT,
      sealedAt: '2026-12-05T12:00:00.000Z',
      verified: true,
      signers: ['effectgate-audit-unit'],
    });
  });

  it('read without the key, or with another, are not verified; an edited one no longer verifies', () => {
    const note = checkpointNote(signer, 'log-1', 42, ROOT, '2026-12-05T12:00:00.000Z');
    expect(readCheckpointNote(note, []).verified).toBe(false);
    const other = parseVerifierKey(generateNoteKey('effectgate-audit-unit').verifierKey);
    expect(readCheckpointNote(note, [other]).verified).toBe(false);
    expect(readCheckpointNote(note.replace('\n42\n', '\n43\n'), [verifier])).toMatchObject({
      size: 43,
      verified: false,
    });
  });

  it('refuses what is not a checkpoint note', () => {
    expect(() => readCheckpointNote('hello\n', [verifier])).toThrow(SignedNoteError);
    expect(() => readCheckpointNote('effectgate/audit/x\nnot a size\nAAAA\n\n\u2014 a AAAA\n', [])).toThrow(
      SignedNoteError,
    );
  });
});
