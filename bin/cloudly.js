#!/usr/bin/env node
// The `cloudly` executable from a checkout: runs the TypeScript sources through tsx, as `npm start` does.
// `cloudly server` starts exactly what `npm start` starts: bin/cloudly-server --source (the server's
// node flags, ts/cli.ts under tsx).
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);

if (args[0] === 'server') {
  const child = spawn(join(root, 'bin', 'cloudly-server'), ['--source', ...args.slice(1)], {
    cwd: process.cwd(),
    stdio: 'inherit',
  });
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => child.kill(signal));
  }
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(pathToFileURL(join(root, 'ts', 'cli', 'main.ts')).href);
}
