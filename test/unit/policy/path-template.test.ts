import { describe, expect, it } from 'vitest';
import { PathTemplate } from '../../../src/policy/path-template.js';

describe('PathTemplate', () => {
  const t = new PathTemplate('/repos/{owner}/{repo}/issues');

  it('decodes the captures of a hit, and only of a hit', () => {
    expect(t.match('/repos/a%20b/api/issues')).toEqual({ owner: 'a b', repo: 'api' });
    expect(t.match('/repos/a%20b/api/issues/')).toEqual({ owner: 'a b', repo: 'api' });
    expect(t.match('/repos/acme/api/comments')).toBeNull();
    expect(t.match('/repos/acme/api')).toBeNull();
    expect(t.match('/repos/acme/api/issues/7')).toBeNull();
    expect(t.match('/repos//api/issues')).toBeNull();
  });

  it('misses on a malformed capture only where the literals hit', () => {
    expect(t.match('/repos/%E0%A4%A/api/issues')).toBeNull();
    // The literals miss first: the same answer, nothing decoded.
    expect(t.match('/repos/%E0%A4%A/api/comments')).toBeNull();
  });

  it('folds case in matchFolded, captures as sent', () => {
    expect(t.matchFolded('/REPOS/Acme/Api/Issues')).toEqual({ owner: 'Acme', repo: 'Api' });
    expect(t.match('/REPOS/Acme/Api/Issues')).toBeNull();
    expect(new PathTemplate('/health').matchFolded('/HEALTH')).toEqual({});
  });
});
