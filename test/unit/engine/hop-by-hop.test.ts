import { describe, expect, it } from 'vitest';
import { connectionNamedHeaders, stripHopByHop } from '../../../src/engine/hop-by-hop.js';

describe('connectionNamedHeaders', () => {
  it('names nothing more for no field or a lone hop-by-hop token', () => {
    expect([...connectionNamedHeaders({})]).toEqual([]);
    expect([...connectionNamedHeaders({ connection: 'keep-alive' })]).toEqual([]);
    expect([...connectionNamedHeaders({ connection: ' Keep-Alive ' })]).toEqual([]);
    expect([...connectionNamedHeaders({ 'proxy-connection': 'keep-alive' })]).toEqual([]);
  });

  it('names every token otherwise, close included', () => {
    expect([...connectionNamedHeaders({ connection: 'keep-alive, X-Trace' })]).toEqual([
      'keep-alive',
      'x-trace',
    ]);
    expect([...connectionNamedHeaders({ connection: 'close' })]).toEqual(['close']);
    expect([
      ...connectionNamedHeaders({ connection: ['keep-alive', 'x-a'], 'proxy-connection': 'x-b' }),
    ]).toEqual(['keep-alive', 'x-a', 'x-b']);
  });

  it('is what stripHopByHop removes', () => {
    const headers = { connection: 'x-trace', 'x-trace': '1', 'keep-alive': 'timeout=5', close: 'c', a: 'b' };
    expect(stripHopByHop(headers)).toEqual({ close: 'c', a: 'b' });
    expect(stripHopByHop({ ...headers, connection: 'close' })).toEqual({ 'x-trace': '1', a: 'b' });
  });
});
