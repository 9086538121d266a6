/** Milliseconds per unit of the duration grammar in docs/policy-reference.md ("Durations"). */
const UNIT_MS: Readonly<Record<string, number>> = Object.freeze({
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
});

// One integer and one unit, nothing else: "1h30m", "1.5h" or " 2s" are refused rather than guessed at.
const DURATION = /^(\d{1,12})(ms|s|m|h|d)$/;

/**
 * Parses a policy duration (`500ms`, `90s`, `15m`, `24h`, `7d`) into milliseconds; `permanent`
 * gives `null` (no expiry). Anything else throws, so a typo never becomes a silent default.
 *
 * @example parseDuration('90s') // 90000
 */
export function parseDuration(text: string): number | null {
  if (text === 'permanent') return null;
  const m = DURATION.exec(text);
  if (m === null) {
    throw new Error(
      `invalid duration ${JSON.stringify(text)}: expected <integer><unit> (500ms, 90s, 15m, 24h, 7d) or permanent`,
    );
  }
  const ms = Number(m[1]) * (UNIT_MS[m[2]!] ?? Number.NaN);
  if (!Number.isSafeInteger(ms)) throw new Error(`invalid duration ${JSON.stringify(text)}: too large`);
  return ms;
}
