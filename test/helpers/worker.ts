import { describe } from 'node:test';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { trackTestDeclarations } from './harnesshook.js';
import { transpiledPath, transpiledRootEnvName } from '../../scripts/testjs.js';

/** Where the run's transpiled files are, when this process runs them instead of TypeScript through tsx (scripts/testjs.ts). */
const transpiledRoot = process.env[transpiledRootEnvName];

/**
 * A shared test process (scripts/test.ts): it runs the test files the runner sends it, one after
 * another, each as a top-level suite named after the file, so a file's own top-level hooks
 * (`before`, `after`) stay scoped to its tests. What this saves is the start-up every file paid
 * alone (Node, loading the sources, then importing the server's module graph: seconds a file). The file
 * reporter (test/helpers/filereporter.ts) tells the runner when a file has finished.
 */
process.on('message', (messageArg: { file?: string; finish?: boolean }) => {
  if (typeof messageArg.file === 'string') {
    const file = messageArg.file;
    // Node's test-context tracking is needed only while the file declares its tests
    // (test/helpers/harnesshook.ts).
    trackTestDeclarations(true);
    describe(file, async () => {
      try {
        await import(pathToFileURL(transpiledRoot ? transpiledPath(transpiledRoot, file) : path.resolve(file)).href);
      } finally {
        trackTestDeclarations(false);
      }
    });
  } else if (messageArg.finish) {
    // Nothing more comes: the process ends when the last file's servers and timers are gone.
    process.disconnect();
  }
});
process.send?.({ ready: true });
