import asyncHooks from 'node:async_hooks';

/**
 * Loaded first in a shared test process (scripts/test.ts, test/helpers/worker.ts), before
 * node:test. Node 20's test harness enables an async hook with `init` and `destroy` callbacks for
 * every async resource in the process, promises included. It needs the hook for two things: to
 * find the suite a `describe`/`it`/`before` call belongs to (the async context it is called
 * from), and to blame an uncaught error on the test it came from. The servers under test run in
 * the same process and make millions of promises, so that hook and the garbage collector's
 * destroy tracking cost a large part of a whole run's CPU (docs/testing.md, "Where the CPU goes").
 *
 * Here the harness's hook is kept but switched on only while a file declares its tests (the
 * worker imports the file inside its suite) and off while they run. While they run, an uncaught
 * error or unhandled rejection cannot be blamed on one test, so it is recorded here and fails the
 * file that was running (test/helpers/filereporter.ts), with the error in the file's output.
 * CLOUDLY_TEST_HARNESS_HOOK=1 leaves Node's hook on throughout.
 */
const keepHarnessHook = process.env.CLOUDLY_TEST_HARNESS_HOOK === '1';
const realCreateHook = asyncHooks.createHook;
let harnessHook: asyncHooks.AsyncHook | null = null;

asyncHooks.createHook = ((callbacksArg: asyncHooks.HookCallbacks) => {
  const hook = realCreateHook(callbacksArg);
  if (!keepHarnessHook && harnessHook === null && new Error().stack?.includes('internal/test_runner/harness')) {
    harnessHook = hook;
  }
  return hook;
}) as typeof asyncHooks.createHook;

/** Switches the harness's hook on (a file is declaring its tests) or off (they run). */
export const trackTestDeclarations = (onArg: boolean): void => {
  if (harnessHook) {
    if (onArg) {
      harnessHook.enable();
    } else {
      harnessHook.disable();
      // Node picks how promises are tracked only when a hook is enabled, so after a disable the
      // destroy tracking the harness asked for stays on while any other hook (AsyncLocalStorage's)
      // is enabled. Enabling and disabling a hook with no init or destroy makes Node pick again.
      const refresh = realCreateHook({ before() {} });
      refresh.enable();
      refresh.disable();
    }
  }
};

/** Uncaught errors seen since the runner last asked, as text, oldest first. */
const strayErrors: string[] = [];

const record = (kindArg: string) => (errorArg: unknown) => {
  const text = errorArg instanceof Error ? errorArg.stack ?? String(errorArg) : String(errorArg);
  strayErrors.push(`${kindArg}: ${text}`);
};
process.on('uncaughtException', record('uncaught exception'));
process.on('unhandledRejection', record('unhandled rejection'));

/** Hands over (and forgets) the uncaught errors recorded since the last call. */
export const takeStrayErrors = (): string[] => strayErrors.splice(0, strayErrors.length);
