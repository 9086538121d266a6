#!/usr/bin/env node
// Part of `npm test`: the real-client suites (test/e2e/python-clients.test.ts, mcp-clients.test.ts)
// run Python client libraries as an agent does: Debian's requests, httpx, PyGithub and
// stripe-python, with Debian's Python. When one is missing and this process may install packages
// (root with apt-get, as on the project's machines and in CI), install them. The MCP Python SDK is
// not packaged by Debian: it is installed with pip, from the index this machine's pip is set up
// with, into a virtual environment beside the npm cache (node_modules/.cache). Otherwise say which
// clients will report themselves skipped, and why. Never fails the run: a missing client is a
// skipped test with its reason.
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { aptInstall, canAptInstall } from './apt-install.mjs';

/** Debian package → the module Debian's Python imports from it. */
const CLIENTS = {
  'python3-requests': 'requests',
  'python3-httpx': 'httpx',
  'python3-github': 'github',
  'python3-stripe': 'stripe',
};
const PYTHON = '/usr/bin/python3';
/** Pinned: the version the MCP suite was written against. */
const MCP_PYTHON_SDK = 'mcp==2.3.0';
const MCP_VENV = new URL('../node_modules/.cache/effectgate-python-mcp/', import.meta.url).pathname;

const imports = (module, python = PYTHON) => {
  try {
    execFileSync(python, ['-c', `import ${module}`], { stdio: 'ignore', timeout: 30_000 });
    return true;
  } catch {
    return false;
  }
};
const absent = () => Object.entries(CLIENTS).filter(([, module]) => !imports(module));

let missing = absent();
if (missing.length > 0 && canAptInstall) {
  const packages = missing.map(([pkg]) => pkg);
  if (!existsSync(PYTHON)) packages.push('python3');
  console.error(`Installing the real-client suites' Debian packages: ${packages.join(' ')}…`);
  aptInstall(packages, 'those clients');
  missing = absent();
}
for (const [pkg, module] of missing) {
  console.error(
    `real-client tests of ${module} will be skipped: ${PYTHON} cannot import it (Debian: ${pkg})`,
  );
}

const venvPython = `${MCP_VENV}bin/python`;
if (!imports('mcp', venvPython)) {
  console.error(`Installing the MCP Python SDK (${MCP_PYTHON_SDK}) into ${MCP_VENV}…`);
  try {
    rmSync(MCP_VENV, { recursive: true, force: true });
    // The machine's python3 (with pip and its index settings), not Debian's, which has no venv.
    execFileSync('python3', ['-m', 'venv', MCP_VENV], { stdio: 'ignore', timeout: 120_000 });
    execFileSync(venvPython, ['-m', 'pip', 'install', '--quiet', '--retries', '0', MCP_PYTHON_SDK], {
      stdio: 'ignore',
      timeout: 600_000,
    });
  } catch (err) {
    console.error(`pip could not install it (${err.message}).`);
  }
  if (!imports('mcp', venvPython)) {
    console.error(`real-client tests of the MCP Python SDK will be skipped: ${venvPython} cannot import mcp`);
  }
}
