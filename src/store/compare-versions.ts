/** MAJOR.MINOR.PATCH with an optional pre-release, as npm writes a package's version (semver 2.0.0). */
const SEMVER = /^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$/;

/**
 * Orders two effectgate versions by semver 2.0.0 precedence (§11): negative when `a` is older,
 * positive when newer, 0 when equal or when either is not a version (build metadata is ignored).
 * Not a version means "cannot tell": the store never refuses on a value it cannot read.
 */
export function compareVersions(a: string, b: string): number {
  const x = SEMVER.exec(a);
  const y = SEMVER.exec(b);
  if (x === null || y === null) return 0;
  for (let i = 1; i <= 3; i++) {
    const d = Number(x[i]) - Number(y[i]);
    if (d !== 0) return Math.sign(d);
  }
  return comparePreRelease(x[4], y[4]);
}

/** A version with a pre-release is older than the same one without; identifiers compare in turn. */
function comparePreRelease(a: string | undefined, b: string | undefined): number {
  if (a === b) return 0;
  if (a === undefined) return 1;
  if (b === undefined) return -1;
  const xs = a.split('.');
  const ys = b.split('.');
  for (let i = 0; i < Math.min(xs.length, ys.length); i++) {
    const p = xs[i]!;
    const q = ys[i]!;
    if (p === q) continue;
    const pn = /^\d+$/.test(p);
    const qn = /^\d+$/.test(q);
    // Numeric identifiers compare as numbers and sort before alphanumeric ones.
    if (pn && qn) return Math.sign(Number(p) - Number(q));
    if (pn !== qn) return pn ? -1 : 1;
    return p < q ? -1 : 1;
  }
  return Math.sign(xs.length - ys.length);
}
