/**
 * The root fields of a GraphQL operation, read as graphql-js's executor reads them: the operation
 * operationName chooses, fragments and inline fragments flattened, @skip/@include decided with the
 * variables (defaults when absent), one execution per response name; what servers could read two
 * ways refused, never guessed.
 */
import { parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { ArgumentRefusal } from '../../../src/engine/argument-refusal.js';
import { type GraphqlOperation, graphqlRootFields } from '../../../src/engine/graphql-root-fields.js';

function read(
  doc: string,
  operationName?: unknown,
  variables: Record<string, unknown> = {},
): GraphqlOperation {
  return graphqlRootFields(parse(doc), operationName, variables);
}

/** Field name, response name and arguments as plain JSON (the arguments have no prototype). */
function fields(op: GraphqlOperation): unknown[] {
  return op.fields.map((f) => ({ ...f, args: JSON.parse(JSON.stringify(f.args)) }));
}

function refusal(fn: () => unknown): ArgumentRefusal {
  try {
    fn();
  } catch (err) {
    if (err instanceof ArgumentRefusal) return err;
    throw err;
  }
  throw new Error('expected an ArgumentRefusal');
}

describe('graphqlRootFields', () => {
  it('reads the one mutation field with literal arguments, enums as their names', () => {
    const op = read(
      'mutation { issueCreate(input: {title: "Disk", teamId: "T1", priority: 2, state: OPEN, labels: ["a", null]}) { success } }',
    );
    expect(op.type).toBe('mutation');
    expect(op.name).toBeNull();
    expect(fields(op)).toEqual([
      {
        name: 'issueCreate',
        responseName: 'issueCreate',
        args: { input: { title: 'Disk', teamId: 'T1', priority: 2, state: 'OPEN', labels: ['a', null] } },
      },
    ]);
  });

  it('substitutes variables, nested and whole, and takes a declared default when one is absent', () => {
    const doc = `mutation M($t: String!, $team: String = "T9", $p: Int = 3, $none: String) {
      issueCreate(input: {title: $t, teamId: $team, priority: $p, assignee: $none}) { success }
    }`;
    expect(fields(read(doc, undefined, { t: 'Disk', p: null }))[0]).toMatchObject({
      // An explicit null wins over the default; an absent variable without one leaves its member out.
      args: { input: { title: 'Disk', teamId: 'T9', priority: null } },
    });
    const whole = read(
      'mutation M($input: IssueCreateInput!) { issueCreate(input: $input) { success } }',
      'M',
      {
        input: { title: 'Disk', teamId: 'T1' },
      },
    );
    expect(fields(whole)[0]).toMatchObject({ args: { input: { title: 'Disk', teamId: 'T1' } } });
  });

  it('leaves out an argument whose variable is absent, and reads an absent list item as null', () => {
    const op = read('mutation($a: ID, $b: ID) { tag(id: $a, ids: [$b, "x"]) { ok } }');
    expect(fields(op)[0]).toMatchObject({ args: { ids: [null, 'x'] } });
    expect(Object.keys(op.fields[0]!.args)).toEqual(['ids']);
  });

  it('answers under the alias, and reads fields through fragments and inline fragments', () => {
    const op = read(`
      mutation { ...Root }
      fragment Root on Mutation { ... on Mutation { created: issueCreate(input: {title: "x"}) { id } } }
    `);
    expect(fields(op)).toEqual([
      { name: 'issueCreate', responseName: 'created', args: { input: { title: 'x' } } },
    ]);
  });

  it('merges one response name selected twice with the same arguments into one execution', () => {
    const op = read(`mutation {
      issueCreate(input: {title: "x"}) { id }
      ...F
      __typename
    }
    fragment F on Mutation { issueCreate(input: {title: "x"}) { title } }`);
    expect(op.fields.map((f) => f.name)).toEqual(['issueCreate']);
  });

  it('refuses one response name given to two fields, or to one field with two argument sets', () => {
    expect(
      refusal(() =>
        read('mutation { a: issueCreate(input: {title: "x"}) { id } a: issueDelete(id: "1") { ok } }'),
      ).code,
    ).toBe('EG_ERR_ARGUMENTS_AMBIGUOUS');
    expect(
      refusal(() =>
        read('mutation { issueCreate(input: {title: "x"}) { id } issueCreate(input: {title: "y"}) { id } }'),
      ).code,
    ).toBe('EG_ERR_ARGUMENTS_AMBIGUOUS');
  });

  it('lists every root field of a mutation that performs several (the caller refuses them)', () => {
    const op = read(
      'mutation { a: issueCreate(input: {title: "x"}) { id } b: issueCreate(input: {title: "y"}) { id } }',
    );
    expect(op.fields.map((f) => f.responseName)).toEqual(['a', 'b']);
  });

  it('decides @skip and @include with literals and variables, defaults included', () => {
    const doc = `mutation M($skip: Boolean = true, $inc: Boolean!) {
      a: issueCreate(input: {title: "a"}) @skip(if: $skip) { id }
      b: issueCreate(input: {title: "b"}) @include(if: $inc) { id }
      ... @include(if: false) { c: issueDelete(id: "1") { ok } }
      ...D @skip(if: false)
    }
    fragment D on Mutation { d: commentCreate(input: {body: "d"}) { ok } }`;
    expect(read(doc, 'M', { inc: false }).fields.map((f) => f.responseName)).toEqual(['d']);
    expect(read(doc, 'M', { inc: true, skip: false }).fields.map((f) => f.responseName)).toEqual([
      'a',
      'b',
      'd',
    ]);
  });

  it('refuses a directive condition that is no boolean', () => {
    const doc = 'mutation M($inc: Boolean) { a: issueCreate(input: {}) @include(if: $inc) { id } }';
    expect(refusal(() => read(doc, 'M', {})).code).toBe('EG_ERR_GRAPHQL_INVALID');
    expect(refusal(() => read(doc, 'M', { inc: 'true' })).code).toBe('EG_ERR_GRAPHQL_INVALID');
  });

  it('chooses the operation by operationName exactly, or the single one when none is named', () => {
    const doc = 'query Q { viewer { id } } mutation M { issueCreate(input: {}) { id } }';
    expect(read(doc, 'M').type).toBe('mutation');
    expect(read(doc, 'Q').type).toBe('query');
    expect(read('mutation M { issueCreate(input: {}) { id } }', null).name).toBe('M');
    for (const name of [undefined, null, 'm', '', 7]) {
      expect(refusal(() => read(doc, name)).code, String(name)).toBe('EG_ERR_GRAPHQL_INVALID');
    }
    expect(refusal(() => read('mutation M { a } mutation M { b }', 'M')).code).toBe('EG_ERR_GRAPHQL_INVALID');
  });

  it('refuses a fragment or a variable that does not exist, a fragment defined twice, and type definitions', () => {
    expect(refusal(() => read('mutation { ...Nope }')).code).toBe('EG_ERR_GRAPHQL_INVALID');
    expect(refusal(() => read('mutation { issueCreate(title: $t) { id } }')).code).toBe(
      'EG_ERR_GRAPHQL_INVALID',
    );
    expect(
      refusal(() => read('mutation { ...F } fragment F on Mutation { a } fragment F on Mutation { b }')).code,
    ).toBe('EG_ERR_ARGUMENTS_AMBIGUOUS');
    expect(refusal(() => read('mutation { a } type T { f: Int }')).code).toBe('EG_ERR_GRAPHQL_INVALID');
  });

  it('refuses an argument or an input member given twice', () => {
    expect(refusal(() => read('mutation { a(x: 1, x: 2) }')).code).toBe('EG_ERR_ARGUMENTS_AMBIGUOUS');
    expect(refusal(() => read('mutation { a(x: {t: 1, t: 2}) }')).code).toBe('EG_ERR_ARGUMENTS_AMBIGUOUS');
  });

  it('spreads a fragment once, so a cycle ends', () => {
    const op = read('mutation { ...A } fragment A on Mutation { a ...B } fragment B on Mutation { ...A }');
    expect(op.fields.map((f) => f.name)).toEqual(['a']);
  });

  it('keeps member names like __proto__ as data', () => {
    const op = read('mutation { a(__proto__: {__proto__: 1}) }');
    expect(Object.hasOwn(op.fields[0]!.args, '__proto__')).toBe(true);
  });
});
