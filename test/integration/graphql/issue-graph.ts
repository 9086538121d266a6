/**
 * A GraphQL stand-in for Linear's API on loopback, for the real-client tests: a real graphql-js
 * schema executed by graphql-js on a `node:http` server at `POST /graphql`, answering as Linear
 * does (HTTP 200 for every executed request, the reason of a mutation that did nothing in
 * `errors` with `data: null`). Its `ledger` is the destination's own record of every issue it
 * created, the ground truth the tests compare the gate's trail with.
 *
 * `issueCreate(input: { teamId, title, priority })` creates an issue; a priority outside 0–4 is
 * refused with an `INVALID_INPUT` error (Linear's "Argument Validation Error"), creating nothing.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildSchema, GraphQLError, graphql } from 'graphql';

export interface CreatedIssue {
  readonly id: string;
  readonly teamId: string;
  readonly title: string;
  readonly priority: number | null;
}

export interface IssueGraph {
  /** `http://127.0.0.1:PORT/graphql` */
  readonly url: string;
  readonly ledger: readonly CreatedIssue[];
  /** Every issueCreate the server executed, created or refused. */
  readonly calls: readonly { readonly teamId: string; readonly title: string; readonly created: boolean }[];
  close(): Promise<void>;
}

const schema = buildSchema(`
  type Issue { id: String!, title: String!, priority: Int }
  type IssuePayload { success: Boolean!, lastSyncId: Float!, issue: Issue }
  input IssueCreateInput { teamId: String!, title: String!, priority: Int, description: String }
  type Query { issue(id: String!): Issue }
  type Mutation { issueCreate(input: IssueCreateInput!): IssuePayload! }
`);

export async function startIssueGraph(): Promise<IssueGraph> {
  const ledger: CreatedIssue[] = [];
  const calls: { teamId: string; title: string; created: boolean }[] = [];
  const rootValue = {
    issue: ({ id }: { id: string }) => ledger.find((i) => i.id === id) ?? null,
    issueCreate: ({ input }: { input: { teamId: string; title: string; priority?: number | null } }) => {
      const priority = input.priority ?? null;
      if (priority !== null && (priority < 0 || priority > 4)) {
        calls.push({ teamId: input.teamId, title: input.title, created: false });
        throw new GraphQLError('Argument Validation Error', {
          extensions: {
            code: 'INVALID_INPUT',
            type: 'invalid input',
            userPresentableMessage: 'priority must be between 0 and 4.',
          },
        });
      }
      const issue = { id: `ISS-${ledger.length + 1}`, teamId: input.teamId, title: input.title, priority };
      ledger.push(issue);
      calls.push({ teamId: input.teamId, title: input.title, created: true });
      return { success: true, lastSyncId: ledger.length, issue };
    },
  };
  const server = createServer((req, res) => {
    void (async () => {
      const { query, variables, operationName } = JSON.parse(await text(req)) as {
        query: string;
        variables?: Record<string, unknown>;
        operationName?: string;
      };
      const result = await graphql({
        schema,
        source: query,
        rootValue,
        variableValues: variables,
        operationName,
      });
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify(result));
    })().catch((err: unknown) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(err));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/graphql`,
    ledger,
    calls,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function text(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
