import { describe, expect, it } from 'vitest';
import { compareVersions } from '../../../src/store/compare-versions.js';

describe('compareVersions', () => {
  it('orders versions by semver precedence', () => {
    // Each older than the next (semver 2.0.0 §11's own example, then numbers past one digit).
    const ordered = [
      '1.0.0-alpha',
      '1.0.0-alpha.1',
      '1.0.0-alpha.beta',
      '1.0.0-beta',
      '1.0.0-beta.2',
      '1.0.0-beta.11',
      '1.0.0-rc.1',
      '1.0.0',
      '1.0.9',
      '1.0.10',
      '1.2.0',
      '1.10.0',
      '2.0.0',
    ];
    for (let i = 0; i < ordered.length; i++) {
      for (let j = 0; j < ordered.length; j++) {
        expect(compareVersions(ordered[i]!, ordered[j]!), `${ordered[i]} vs ${ordered[j]}`).toBe(
          Math.sign(i - j),
        );
      }
    }
  });

  it('ignores build metadata and cannot order what is not a version', () => {
    expect(compareVersions('1.0.0+build.5', '1.0.0')).toBe(0);
    expect(compareVersions('next', '1.0.0')).toBe(0);
    expect(compareVersions('1.0.0', '')).toBe(0);
  });
});
