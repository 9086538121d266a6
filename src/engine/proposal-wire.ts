import type { PolicyFileText, Tool } from '../policy/index.js';
import type { Scope } from '../store/index.js';
import {
  type ArgumentDocument,
  contentTypeOf,
  type GraphqlArguments,
  parseBody,
} from './argument-document.js';
import { readGraphqlRequest } from './graphql-request.js';
import type { BodyLimits } from './json-scan.js';
import type { Proposal, Proposed } from './proposal.js';
import type { GateRequest } from './types.js';

/**
 * What crosses between the event loop and a body-analysis worker. Structured clone carries plain
 * data only, so a proposal goes as its tool's id, and without the parsed body: sending a big body
 * back would cost the event loop the very deserialization the worker is there to spare it.
 */

/** `workerData` of a worker: the gate's policies as texts, and the settings `propose` reads. */
export interface WorkerSetup {
  readonly sources: readonly PolicyFileText[];
  readonly scope: Scope;
  readonly authorityKey: string | null;
  readonly bodyLimits: BodyLimits;
  readonly maxDuplicateSkips: number;
}

export interface WorkerJob {
  readonly id: number;
  readonly request: GateRequest;
  /** The governed host names the request's host is an address of (`GovernedAddresses.namesFor`). */
  readonly names: readonly string[];
}

export type WorkerReply =
  | { readonly id: number; readonly ok: true; readonly proposed: WireProposed }
  | { readonly id: number; readonly ok: false; readonly error: string };

type WireProposal = Omit<Proposal, 'tool' | 'args'> & {
  readonly toolId: string;
  readonly args: Omit<ArgumentDocument, 'body' | 'graphql'>;
};

export type WireProposed =
  | Exclude<Proposed, { kind: 'proposal' }>
  | { readonly kind: 'proposal'; readonly proposal: WireProposal };

export function toWire(proposed: Proposed): WireProposed {
  if (proposed.kind !== 'proposal') return proposed;
  const { tool, args, ...rest } = proposed.proposal;
  return {
    kind: 'proposal',
    proposal: { ...rest, toolId: tool.id, args: { path: args.path, query: args.query } },
  };
}

/**
 * The proposal back on the event loop: its tool from this gate's own policies, and its body (and a
 * GraphQL call's arguments) read again only if something reads them (a reconciliation lookup's
 * `match`; every verdict has `rpcId`, every GraphQL outcome `graphql`).
 */
export function fromWire(
  wire: WireProposed,
  tools: ReadonlyMap<string, Tool>,
  request: GateRequest,
  limits: BodyLimits,
): Proposed {
  if (wire.kind !== 'proposal') return wire;
  const { toolId, args, ...rest } = wire.proposal;
  const tool = tools.get(toolId);
  if (tool === undefined) throw new Error(`analysis worker named a tool this gate does not have: ${toolId}`);
  let body: { value: unknown } | null = null;
  let graphql: { value: GraphqlArguments | undefined } | null = null;
  const call = rest.graphql;
  const lazy: ArgumentDocument = {
    path: args.path,
    query: args.query,
    get body(): unknown {
      // The worker accepted this body under the same limits, so this cannot refuse it.
      body ??= { value: parseBody(request.body, contentTypeOf(request), limits) };
      return body.value;
    },
    get graphql(): GraphqlArguments | undefined {
      // The worker read this very document so: the same field comes back under the same name.
      graphql ??= {
        value:
          call === null
            ? undefined
            : {
                field: call.field,
                args:
                  readGraphqlRequest(request, this.body, limits)?.fields.find(
                    (f) => f.responseName === call.responseName,
                  )?.args ?? {},
              },
      };
      return graphql.value;
    },
  };
  return { kind: 'proposal', proposal: { ...rest, tool, args: lazy } };
}
