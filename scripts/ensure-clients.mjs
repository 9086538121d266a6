#!/usr/bin/env node
// Part of `npm test`: the real-client suites (test/e2e/python-clients.test.ts) run Python client
// libraries as an agent does: Debian's requests, httpx, PyGithub and stripe-python, with Debian's
// Python. When one is missing and this process may install packages (root with apt-get, as on the
// project's machines and in CI), install them; otherwise say which clients will report themselves
// skipped, and why. Never fails the run: a missing client is a skipped test with its reason.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** Debian package → the module Debian's Python imports from it. */
const CLIENTS = {
  'python3-requests': 'requests',
  'python3-httpx': 'httpx',
  'python3-github': 'github',
  'python3-stripe': 'stripe',
};
const PYTHON = '/usr/bin/python3';

const imports = (module) => {
  try {
    execFileSync(PYTHON, ['-c', `import ${module}`], { stdio: 'ignore', timeout: 30_000 });
    return true;
  } catch {
    return false;
  }
};
const absent = () => Object.entries(CLIENTS).filter(([, module]) => !imports(module));

let missing = absent();
const canInstall = process.getuid?.() === 0 && existsSync('/usr/bin/apt-get');
if (missing.length > 0 && canInstall) {
  const packages = missing.map(([pkg]) => pkg);
  if (!existsSync(PYTHON)) packages.push('python3');
  console.error(`Installing the real-client suites' Debian packages: ${packages.join(' ')}…`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () =>
    execFileSync('apt-get', ['install', '-y', '--no-install-recommends', ...packages], {
      env,
      stdio: 'ignore',
    });
  try {
    install();
  } catch {
    try {
      execFileSync('apt-get', ['update'], { env, stdio: 'ignore' });
      install();
    } catch (err) {
      console.error(`apt-get could not install them (${err.message}); those clients will be skipped.`);
    }
  }
  missing = absent();
}
for (const [pkg, module] of missing) {
  console.error(
    `real-client tests of ${module} will be skipped: ${PYTHON} cannot import it (Debian: ${pkg})`,
  );
}
