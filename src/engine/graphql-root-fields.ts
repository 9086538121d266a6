/**
 * The root fields a GraphQL operation executes, read from its document as graphql-js's executor
 * reads them (`collectFields`, GraphQL spec §6.3.2 "CollectFields"): the operation chosen by
 * `operationName`, fragment spreads and inline fragments flattened, `@skip`/`@include` decided
 * with the request's variables (a variable's default when the request gives none), fields of one
 * response name merged into one execution. No schema is known here, so an inline fragment's type
 * condition is taken to hold (a server that validates refuses one that does not, so reading it
 * in can only make the gate refuse more, never key less), and argument values are read untyped:
 * literals as their JSON, enum values as their names, variables substituted.
 *
 * Whatever servers may read two ways is refused rather than guessed (`ArgumentRefusal`): an
 * operation that cannot be chosen, a fragment or variable that does not exist, a directive
 * condition that is not a boolean, one response name given to two fields or two argument sets,
 * an argument or input member given twice.
 */
import {
  type ArgumentNode,
  type DirectiveNode,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';
import { ArgumentRefusal } from './argument-refusal.js';
import { canonicalJson } from './canonical-json.js';

export type GraphqlOperationType = 'query' | 'mutation' | 'subscription';

/** One root field an operation executes (its response name is what `data` answers it under). */
export interface GraphqlRootField {
  readonly name: string;
  /** The alias, or the field name when there is none. */
  readonly responseName: string;
  /** Arguments with variables substituted; an argument whose variable is absent is left out. */
  readonly args: Readonly<Record<string, unknown>>;
}

export interface GraphqlOperation {
  readonly type: GraphqlOperationType;
  readonly name: string | null;
  /** In document order, one per response name; `__typename` (no effect of its own) left out. */
  readonly fields: readonly GraphqlRootField[];
}

/** A variable the request does not give and the operation gives no default for. */
const ABSENT: unique symbol = Symbol('absent');

/**
 * The operation `operationName` chooses in `document` and the root fields it executes.
 * `operationName` is as the request sent it (`undefined` or `null`: the document's one operation).
 *
 * @throws {ArgumentRefusal} `graphql_invalid` or `arguments_ambiguous` (see the module comment).
 */
export function graphqlRootFields(
  document: DocumentNode,
  operationName: unknown,
  variables: Readonly<Record<string, unknown>>,
): GraphqlOperation {
  const operation = chooseOperation(document, operationName);
  const fragments = fragmentsOf(document);
  const values = variableValues(operation, variables);
  const grouped = new Map<string, FieldNode[]>();
  collect(operation.selectionSet, fragments, values, grouped, new Set());
  const fields: GraphqlRootField[] = [];
  for (const [responseName, nodes] of grouped) {
    const name = nodes[0]!.name.value;
    if (nodes.some((n) => n.name.value !== name)) {
      throw ArgumentRefusal.graphqlAmbiguous(
        `the response name ${responseName} is given to the fields ${[...new Set(nodes.map((n) => n.name.value))].join(' and ')}`,
      );
    }
    if (name === '__typename') continue;
    const args = argumentsOf(nodes[0]!.arguments ?? [], values);
    const text = nodes.length > 1 ? canonicalJson(args) : '';
    if (nodes.slice(1).some((n) => canonicalJson(argumentsOf(n.arguments ?? [], values)) !== text)) {
      throw ArgumentRefusal.graphqlAmbiguous(
        `the field ${responseName} is selected twice with different arguments`,
      );
    }
    fields.push({ name, responseName, args });
  }
  return { type: operation.operation as GraphqlOperationType, name: operation.name?.value ?? null, fields };
}

function chooseOperation(document: DocumentNode, operationName: unknown): OperationDefinitionNode {
  const operations: OperationDefinitionNode[] = [];
  for (const d of document.definitions) {
    if (d.kind === Kind.OPERATION_DEFINITION) operations.push(d);
    else if (d.kind !== Kind.FRAGMENT_DEFINITION) {
      // Servers refuse a document with type definitions in it (ExecutableDefinitions).
      throw ArgumentRefusal.graphqlInvalid(`the document holds a ${d.kind}, which is not executable`);
    }
  }
  if (operationName === undefined || operationName === null) {
    if (operations.length === 1) return operations[0]!;
    throw ArgumentRefusal.graphqlInvalid(
      operations.length === 0
        ? 'the document holds no operation'
        : `the document holds ${operations.length} operations and the request names none (operationName)`,
    );
  }
  if (typeof operationName !== 'string' || operationName === '') {
    throw ArgumentRefusal.graphqlInvalid('operationName is not a non-empty string');
  }
  const named = operations.filter((o) => o.name?.value === operationName);
  if (named.length === 1) return named[0]!;
  throw ArgumentRefusal.graphqlInvalid(
    named.length === 0
      ? `the document holds no operation named ${operationName}`
      : `the document holds ${named.length} operations named ${operationName}`,
  );
}

function fragmentsOf(document: DocumentNode): ReadonlyMap<string, FragmentDefinitionNode> {
  const out = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) {
    if (d.kind !== Kind.FRAGMENT_DEFINITION) continue;
    // Which of two same-named fragments a server spreads is its own choice (validation refuses them).
    if (out.has(d.name.value))
      throw ArgumentRefusal.graphqlAmbiguous(`the fragment ${d.name.value} is defined twice`);
    out.set(d.name.value, d);
  }
  return out;
}

/** The operation's variables: the request's value, else the declared default, else ABSENT. */
function variableValues(
  operation: OperationDefinitionNode,
  given: Readonly<Record<string, unknown>>,
): ReadonlyMap<string, unknown> {
  const out = new Map<string, unknown>();
  for (const def of operation.variableDefinitions ?? []) {
    const name = def.variable.name.value;
    if (out.has(name)) throw ArgumentRefusal.graphqlAmbiguous(`the variable $${name} is declared twice`);
    if (Object.hasOwn(given, name)) out.set(name, given[name]);
    else if (def.defaultValue !== undefined) out.set(name, jsonOf(def.defaultValue, new Map()));
    else out.set(name, ABSENT);
  }
  return out;
}

function collect(
  selectionSet: SelectionSetNode,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  variables: ReadonlyMap<string, unknown>,
  out: Map<string, FieldNode[]>,
  visited: Set<string>,
): void {
  for (const selection of selectionSet.selections) {
    if (!included(selection.directives ?? [], variables)) continue;
    switch (selection.kind) {
      case Kind.FIELD: {
        const responseName = selection.alias?.value ?? selection.name.value;
        const nodes = out.get(responseName);
        if (nodes === undefined) out.set(responseName, [selection]);
        else nodes.push(selection);
        break;
      }
      case Kind.INLINE_FRAGMENT:
        collect(selection.selectionSet, fragments, variables, out, visited);
        break;
      case Kind.FRAGMENT_SPREAD: {
        const name = selection.name.value;
        // Spread once, as the executor does: a second spread adds nothing, and a cycle ends here.
        if (visited.has(name)) break;
        visited.add(name);
        const fragment = fragments.get(name);
        if (fragment === undefined)
          throw ArgumentRefusal.graphqlInvalid(`the fragment ${name} is not defined`);
        collect(fragment.selectionSet, fragments, variables, out, visited);
        break;
      }
    }
  }
}

/** `@skip(if:)` and `@include(if:)` decided; a condition that is no boolean is refused. */
function included(directives: readonly DirectiveNode[], variables: ReadonlyMap<string, unknown>): boolean {
  let include = true;
  for (const d of directives) {
    const name = d.name.value;
    if (name !== 'skip' && name !== 'include') continue;
    const conditions = (d.arguments ?? []).filter((a) => a.name.value === 'if');
    const value = conditions.length === 1 ? jsonOf(conditions[0]!.value, variables) : undefined;
    if (typeof value !== 'boolean') {
      throw ArgumentRefusal.graphqlInvalid(`@${name} needs one boolean if: argument`);
    }
    if ((name === 'skip') === value) include = false;
  }
  return include;
}

function argumentsOf(
  nodes: readonly ArgumentNode[],
  variables: ReadonlyMap<string, unknown>,
): Record<string, unknown> {
  const out = Object.create(null) as Record<string, unknown>;
  const seen = new Set<string>();
  for (const a of nodes) {
    const name = a.name.value;
    if (seen.has(name)) throw ArgumentRefusal.graphqlAmbiguous(`the argument ${name} is given twice`);
    seen.add(name);
    const value = jsonOf(a.value, variables);
    // An argument whose variable is absent is not given at all (GraphQL spec §6.4.1).
    if (value !== ABSENT) out[name] = value;
  }
  return out;
}

/** A value node as JSON, variables substituted; ABSENT for a variable the request leaves out. */
function jsonOf(node: ValueNode, variables: ReadonlyMap<string, unknown>): unknown {
  switch (node.kind) {
    case Kind.VARIABLE: {
      const name = node.name.value;
      if (!variables.has(name)) {
        throw ArgumentRefusal.graphqlInvalid(`the variable $${name} is not declared by the operation`);
      }
      return variables.get(name);
    }
    case Kind.INT:
    case Kind.FLOAT: {
      const n = Number(node.value);
      if (!Number.isFinite(n))
        throw ArgumentRefusal.graphqlInvalid(`the number ${node.value} is out of range`);
      return n;
    }
    case Kind.STRING:
    case Kind.ENUM:
      return node.value;
    case Kind.BOOLEAN:
      return node.value;
    case Kind.NULL:
      return null;
    case Kind.LIST:
      // A list item whose variable is absent is null (GraphQL spec §5.6.1 "Input Coercion" of lists).
      return node.values.map((v) => {
        const item = jsonOf(v, variables);
        return item === ABSENT ? null : item;
      });
    case Kind.OBJECT: {
      const out = Object.create(null) as Record<string, unknown>;
      const seen = new Set<string>();
      for (const f of node.fields) {
        const name = f.name.value;
        if (seen.has(name)) throw ArgumentRefusal.graphqlAmbiguous(`the input member ${name} is given twice`);
        seen.add(name);
        const value = jsonOf(f.value, variables);
        if (value !== ABSENT) out[name] = value;
      }
      return out;
    }
  }
}
