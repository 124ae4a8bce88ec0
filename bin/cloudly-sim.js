#!/usr/bin/env node
// The `cloudly-sim` executable from a checkout: runs the simulator's TypeScript sources through
// tsx, as bin/cloudly.js runs the CLI (docs/simulator.md).
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { register } = await import('tsx/esm/api');
register();
await import(pathToFileURL(join(root, 'ts', 'sim', 'main.ts')).href);
