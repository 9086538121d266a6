#!/usr/bin/env node
import { main } from '../dist/cli/index.js';

// `effectgate policies check DIR | head`: a reader that stops early is not an error.
process.stdout.on('error', (err) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw err;
});

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`effectgate: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
