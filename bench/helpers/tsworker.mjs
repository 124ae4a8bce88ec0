/**
 * The entry of a worker thread that runs a TypeScript module (`workerData.entry`, a file path):
 * registers tsx in the worker's own thread first, as `node --import tsx` does for the main one.
 */
import { workerData } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import { register } from 'tsx/esm/api';

register();
await import(pathToFileURL(workerData.entry).href);
