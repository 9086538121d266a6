// Fastify oracle: Fastify 5 with its default content-type parsers (application/json through
// secure-json-parse, text/plain as a string), @fastify/formbody and @fastify/multipart with
// attachFieldsToBody: 'keyValues', and Fastify's defaults otherwise (find-my-way routing:
// case-sensitive, no trailing-slash or duplicate-slash forgiveness; fast-querystring queries).
//
// Bare imports resolve up the folders to the repository's node_modules (dev dependencies).
import { readFileSync } from 'node:fs';
import formbody from '@fastify/formbody';
import multipart from '@fastify/multipart';
import Fastify from 'fastify';

const port = Number(process.env.ORACLE_PORT);
const routesFile = process.env.ORACLE_ROUTES;
if (!port || !routesFile) {
  console.error('ORACLE_PORT and ORACLE_ROUTES are required');
  process.exit(2);
}
const { routes } = JSON.parse(readFileSync(routesFile, 'utf8'));

// The gate's `{name}` becomes find-my-way's `:p<i>`: find-my-way ends a parameter name at `-` or
// `.`, so the route's own names are restored from the index when reporting. A literal `:` is
// written `::` in find-my-way.
function fastifyPath(template) {
  const names = [];
  const url = template
    .split('/')
    .map((segment) => {
      const capture = /^\{(.+)\}$/.exec(segment);
      if (capture) {
        names.push(capture[1]);
        return `:p${names.length - 1}`;
      }
      return segment.replaceAll(':', '::');
    })
    .join('/');
  return { url, names };
}

const app = Fastify();
await app.register(formbody);
await app.register(multipart, { attachFieldsToBody: 'keyValues' });

for (const route of routes) {
  const { url, names } = fastifyPath(route.path);
  app.route({
    method: route.method,
    url,
    handler: async (request, reply) => {
      const path = {};
      names.forEach((name, i) => {
        path[name] = request.params[`p${i}`];
      });
      return reply.code(201).send({
        route: route.name,
        method: request.method,
        path,
        query: request.query,
        // Fastify leaves request.body undefined when the request has no body.
        body: request.body ?? null,
      });
    },
  });
}

try {
  await app.listen({ port, host: '127.0.0.1' });
  console.log('ORACLE READY');
} catch (error) {
  console.error(error);
  process.exit(1);
}
