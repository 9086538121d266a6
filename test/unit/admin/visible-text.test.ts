/**
 * Agent data reads as what it is wherever a person sees it: invisible format
 * characters (bidi overrides and isolates, zero-width characters, the BOM, tag characters) are shown
 * as their code points on the pages and in the CLI, so `Refund\u202E24 rof` cannot pose as another
 * action on an approval card.
 */
import { describe, expect, it } from 'vitest';
import { visibleText } from '../../../src/admin/index.js';
import { escapeHtml } from '../../../src/admin/ui/html.js';
import { keyText, printable } from '../../../src/cli/cli-text.js';

const SPOOF = 'Refund \u202e042 rof\u202c to \u2066acct\u2069\u200b\ufeff\u{e0041}';

describe('visibleText', () => {
  it('shows every invisible format character as its code point and keeps the rest', () => {
    expect(visibleText(SPOOF)).toBe(
      'Refund [U+202E]042 rof[U+202C] to [U+2066]acct[U+2069][U+200B][U+FEFF][U+E0041]',
    );
    expect(visibleText('Zoë, 東京, emoji 👍')).toBe('Zoë, 東京, emoji 👍');
  });

  it('is applied by the pages and by the CLI', () => {
    for (const shown of [escapeHtml(SPOOF), printable(SPOOF), keyText([SPOOF])]) {
      expect(shown).toContain('[U+202E]');
      expect(shown).not.toMatch(/\p{Cf}/u);
    }
  });
});
