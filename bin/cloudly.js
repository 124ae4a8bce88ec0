#!/usr/bin/env node
// The `cloudly` executable from a checkout (and `npx cloudly`). The command line runs from a bundle
// of ts/cli built on first use with esbuild into .nogit/cli/ (CLOUDLY_CLI_CACHE_DIR, which must lie
// inside the checkout: the bundle loads its packages from the checkout's node_modules), and built
// again whenever one of its sources changed: loading TypeScript through tsx on every command cost
// about a second. With no bundle to be had (esbuild missing, a read-only checkout), or with
// CLOUDLY_CLI_SOURCE=1, the sources run through tsx as before (bin/checkoutbundle.js). docs/cli.md
// says more.
// `cloudly server` starts exactly what `npm start` starts: bin/cloudly-server --source.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { checkoutRoot, runFromCheckout } from './checkoutbundle.js';

const args = process.argv.slice(2);

if (args[0] === 'server') {
  const child = spawn(join(checkoutRoot, 'bin', 'cloudly-server'), ['--source', ...args.slice(1)], {
    cwd: process.cwd(),
    stdio: 'inherit',
  });
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => child.kill(signal));
  }
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
} else {
  await runFromCheckout({
    entry: 'ts/cli/main.ts',
    cacheDir: process.env.CLOUDLY_CLI_CACHE_DIR || join(checkoutRoot, '.nogit', 'cli'),
    fromSource: process.env.CLOUDLY_CLI_SOURCE === '1',
  });
}
