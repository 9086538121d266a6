import { describe, expect, it } from 'vitest';
import { AdminRouter } from '../../../src/admin/admin-router.js';

const router = new AdminRouter<string>([
  { method: 'GET', path: '/', handler: 'home' },
  { method: 'GET', path: '/runs', handler: 'runs' },
  { method: 'GET', path: '/runs/:id', handler: 'run' },
  { method: 'POST', path: '/runs/:id/release', handler: 'release' },
  { method: 'POST', path: '/approvals/:id/:action(approve|deny|revoke)', handler: 'decide' },
]);

describe('AdminRouter (one router for the API, the pages and the probes)', () => {
  it('finds a route by its segments and method, with its parameters', () => {
    expect(router.match('GET', ['runs', 'nightly-42'])).toEqual({
      kind: 'found',
      handler: 'run',
      params: { id: 'nightly-42' },
    });
    expect(router.match('HEAD', ['runs'])).toMatchObject({ kind: 'found', handler: 'runs' });
    expect(router.match('GET', [''])).toMatchObject({ kind: 'found', handler: 'home' });
    // A decoded `/` inside one segment stays one parameter.
    expect(router.match('GET', ['runs', 'a/b'])).toMatchObject({ params: { id: 'a/b' } });
  });

  it('answers 405 with what the path allows, and 404 for a path no route has', () => {
    expect(router.match('POST', ['runs'])).toEqual({ kind: 'wrong_method', allow: ['GET', 'HEAD'] });
    expect(router.match('GET', ['runs', 'x', 'release'])).toEqual({ kind: 'wrong_method', allow: ['POST'] });
    expect(router.match('GET', ['nowhere'])).toEqual({ kind: 'not_found' });
    // An empty parameter, and a value outside a closed set, match nothing.
    expect(router.match('GET', ['runs', ''])).toEqual({ kind: 'not_found' });
    expect(router.match('POST', ['approvals', 'a1', 'approve'])).toMatchObject({
      params: { id: 'a1', action: 'approve' },
    });
    expect(router.match('POST', ['approvals', 'a1', 'delete'])).toEqual({ kind: 'not_found' });
  });

  it('treats parameter names as data, never as the prototype', () => {
    const hit = router.match('GET', ['runs', '__proto__']);
    expect(hit).toMatchObject({ kind: 'found', params: { id: '__proto__' } });
  });

  it('refuses a route table with a malformed parameter at load', () => {
    expect(() => new AdminRouter([{ method: 'GET', path: '/runs/:Id-x', handler: 0 }])).toThrow(
      /bad parameter/,
    );
    expect(() => new AdminRouter([{ method: 'GET', path: 'runs', handler: 0 }])).toThrow(/must start with/);
  });
});
