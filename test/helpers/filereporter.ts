import { spec as SpecReporter } from 'node:test/reporters';
import { takeStrayErrors } from './harnesshook.js';

/**
 * The reporter of a shared test process (test/helpers/worker.ts). Every file there is one
 * top-level suite; when one ends, this sends the runner its verdict, its counts and its
 * human-readable (spec) output, so the runner can print each file whole and start the next.
 */

interface ITestEvent {
  type: string;
  data: { name: string; nesting: number; skip?: unknown; todo?: unknown; details?: { type?: string; duration_ms?: number; error?: { failureType?: string } } };
}

export interface IFileCounts {
  tests: number;
  pass: number;
  fail: number;
  cancelled: number;
  skipped: number;
  todo: number;
}

export interface IFileDone {
  done: string;
  ok: boolean;
  durationMs: number;
  counts: IFileCounts;
  output: string;
}

const emptyCounts = (): IFileCounts => ({ tests: 0, pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 });

export default async function* fileReporter(sourceArg: AsyncIterable<ITestEvent>): AsyncGenerator<string> {
  const spec = new SpecReporter();
  let output = '';
  spec.on('data', (chunkArg: Buffer | string) => { output += chunkArg.toString(); });
  let counts = emptyCounts();
  for await (const event of sourceArg) {
    spec.write(event);
    if (event.type !== 'test:pass' && event.type !== 'test:fail') {
      continue;
    }
    const { data } = event;
    if (data.details?.type !== 'suite' && data.nesting > 0) {
      counts.tests += 1;
      if (data.skip) {
        counts.skipped += 1;
      } else if (data.todo) {
        counts.todo += 1;
      } else if (event.type === 'test:pass') {
        counts.pass += 1;
      } else if (data.details?.error?.failureType === 'cancelledByParent') {
        counts.cancelled += 1;
      } else {
        counts.fail += 1;
      }
    }
    if (data.nesting === 0) {
      // Let the spec transform flush what this event produced before the output is handed on.
      await new Promise<void>((resolve) => setImmediate(resolve));
      // An error no test caught while the file ran fails the file (test/helpers/harnesshook.ts).
      const stray = takeStrayErrors();
      for (const text of stray) {
        output += `\n# ${text}\n`;
      }
      const done: IFileDone = { done: data.name, ok: event.type === 'test:pass' && stray.length === 0, durationMs: data.details?.duration_ms ?? 0, counts, output };
      process.send?.(done);
      output = '';
      counts = emptyCounts();
    }
  }
  yield '';
}
