// Express oracle: Express 5 with the body parsers and method override an Express API typically
// installs, each configured as its own README shows, and Express' routing defaults
// (case-insensitive, non-strict trailing slash, captures percent-decoded by the router).
//
// Bare imports resolve up the folders to the repository's node_modules (dev dependencies).
import { readFileSync } from 'node:fs';
import express from 'express';
import methodOverride from 'method-override';
import multer from 'multer';

const port = Number(process.env.ORACLE_PORT);
const routesFile = process.env.ORACLE_ROUTES;
if (!port || !routesFile) {
  console.error('ORACLE_PORT and ORACLE_ROUTES are required');
  process.exit(2);
}
const { routes } = JSON.parse(readFileSync(routesFile, 'utf8'));

// The gate's `{name}` becomes path-to-regexp 8's `:name` (quoted when it is not an identifier);
// literal segments are escaped, since `{ } ( ) [ ] + ? ! : *` are path-to-regexp syntax.
function expressPath(template) {
  return template
    .split('/')
    .map((segment) => {
      const capture = /^\{(.+)\}$/.exec(segment);
      if (capture) {
        const name = capture[1];
        return /^[A-Za-z_$][\w$]*$/.test(name) ? `:${name}` : `:${JSON.stringify(name)}`;
      }
      return segment.replace(/[{}()[\]+?!:*\\]/g, '\\$&');
    })
    .join('/');
}

const app = express();
// Express 5's default query parser is 'simple' (node:querystring): no qs nesting in the query.
app.use(express.json());
app.use(express.urlencoded({ extended: true }));
app.use(multer().none());
// Both overrides apply to POST only (method-override's default `methods`); the body getter runs
// last, so a body `_method` wins over the header. The getter is the README's, which reads any
// parsed body (JSON included) and deletes `_method` from it before the action sees the body.
app.use(methodOverride('X-HTTP-Method-Override'));
app.use(
  methodOverride((req) => {
    if (req.body && typeof req.body === 'object' && '_method' in req.body) {
      const method = req.body._method;
      delete req.body._method;
      return method;
    }
  }),
);

for (const route of routes) {
  app.route(expressPath(route.path))[route.method.toLowerCase()]((req, res) => {
    res.status(201).json({
      route: route.name,
      method: req.method,
      path: req.params,
      query: req.query,
      // Express 5 leaves req.body undefined when no parser read the body.
      body: req.body ?? null,
    });
  });
}

// Express 5 hands a listen error to this callback instead of throwing it.
app.listen(port, '127.0.0.1', (error) => {
  if (error) {
    console.error(error);
    process.exit(1);
  }
  console.log('ORACLE READY');
});
