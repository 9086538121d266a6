/**
 * The known name closest to `unknown`, when it is close enough to be a likely typo (`windw` →
 * `window`, `pending-ttl` → `pending_ttl`, `--stale_afer` → `stale-after`); `null` otherwise, so
 * the hint never misleads. Case and `-`/`_` never count as edits, on either side.
 */
export function suggestField(unknown: string, known: readonly string[]): string | null {
  const needle = normalized(unknown);
  let best: string | null = null;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const d = editDistance(needle, normalized(candidate));
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  const limit = Math.max(1, Math.min(3, Math.floor(needle.length / 3)));
  return best !== null && bestDistance <= limit ? best : null;
}

function normalized(name: string): string {
  return name.toLowerCase().replaceAll('-', '_');
}

/** Levenshtein distance with adjacent transpositions counted as one edit. */
function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) =>
    Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}
