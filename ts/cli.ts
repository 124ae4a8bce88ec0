import type { Cloudly } from './classes.cloudly.js';
import type { ConfigError } from './config.js';

/**
 * How long after the first SIGINT/SIGTERM another one is taken as the same stop rather than the
 * operator's "stop at once" (docs/storage.md, "Signals").
 */
const repeatedSignalWindowMs = 1000;

/** Names every bad variable, one a line, and exits 2. */
const exitForConfiguration = (errorArg: ConfigError): never => {
  for (const problem of errorArg.problems) {
    process.stderr.write(`cloudly: configuration error: ${problem.variable}: ${problem.message}\n`);
  }
  process.exit(2);
};

/** `npm start` (through bin/cloudly-server, which passes the node flags): read the configuration, start Cloudly, stop it gracefully on SIGTERM/SIGINT. */
const main = async (): Promise<void> => {
  // smartdata prints a console line for every decorated member as its classes are declared, the
  // moment it is first imported; ts/core/dependencylogs.ts sends them to Cloudly's logger, so it
  // must run before that. A bundle (the checkout's `npm start`) evaluates every static import of
  // a package before the bundle's own code, so it is loaded first, on its own, and the rest after.
  // (Inside main, not at the top level: the test runner's CommonJS bundle has no top-level await.)
  await import('./core/dependencylogs.js');
  const { Cloudly: CloudlyServer } = await import('./classes.cloudly.js');
  const { ConfigError: ConfigurationError } = await import('./config.js');
  const { DataDirectoryLockedError, StorageDamagedError } = await import('./core/database.js');
  const { TlsMaterialError } = await import('./core/tls.js');
  let cloudly: Cloudly;
  try {
    cloudly = new CloudlyServer();
  } catch (error) {
    if (error instanceof ConfigurationError) {
      exitForConfiguration(error);
    }
    throw error;
  }
  // Whether the start went well, once it has ended: a stop waits for it.
  let startedWell: Promise<boolean> = Promise.resolve(false);
  // When the first stop signal arrived (monotonic ms), or null while none has.
  let stopSignalAt: number | null = null;
  const shutdown = (signalArg: 'SIGTERM' | 'SIGINT'): void => {
    if (stopSignalAt !== null) {
      if (performance.now() - stopSignalAt < repeatedSignalWindowMs) {
        // The same stop reaching the server twice: a terminal sends Ctrl-C to its whole
        // foreground process group, and npm (or `cloudly server`) passes it on once more; a
        // supervisor's SIGTERM to a process group does the same. Only a later one is the
        // operator's second signal.
        cloudly.logger.info({ signal: signalArg, windowMs: repeatedSignalWindowMs }, 'a repeat of the stop signal within the window: the same stop');
        return;
      }
      // A second signal: the operator will not wait for the grace. Every acknowledged write is
      // already in the journal, so ending now loses none; the next start replays it.
      process.stderr.write(`cloudly: second ${signalArg} while stopping: stopping at once\n`);
      process.exit(signalArg === 'SIGTERM' ? 143 : 130);
    }
    stopSignalAt = performance.now();
    cloudly.logger.info({ signal: signalArg, graceMs: cloudly.config.shutdownGraceMs }, 'stopping');
    // A signal during the start stops once the start has ended; a start that failed stops and
    // exits on its own (below).
    void startedWell.then(async (wellArg) => {
      if (!wellArg) {
        return;
      }
      await cloudly.stop().then(() => process.exit(0), (error: unknown) => {
        process.stderr.write(`cloudly: stop failed: ${(error as Error).message}\n`);
        process.exit(1);
      });
    });
  };
  // Before the start, not after it: "cloudly is listening" is logged inside the start, and a
  // supervisor's (or a test's) SIGTERM right after that line must still stop gracefully.
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  const starting = cloudly.start();
  startedWell = starting.then(() => true, () => false);
  try {
    await starting;
  } catch (error) {
    if (error instanceof ConfigurationError) {
      // CLOUDLY_HOST is checked before anything starts: there is nothing to stop.
      exitForConfiguration(error);
    }
    if (error instanceof StorageDamagedError || error instanceof DataDirectoryLockedError) {
      process.stderr.write(`cloudly: ${error.message}\n`);
    } else if (error instanceof TlsMaterialError) {
      process.stderr.write(`cloudly: TLS certificate refused (${error.reason}): ${error.message} (CLOUDLY_TLS_CERT_FILE, CLOUDLY_TLS_KEY_FILE)\n`);
    } else {
      process.stderr.write(`cloudly: failed to start: ${(error as Error).message}\n`);
    }
    await cloudly.stop().catch(() => undefined);
    process.exit(1);
  }
  if (cloudly.generatedAdminPassword) {
    // Printed once, straight to the terminal and never through the logger.
    process.stdout.write(
      `\nFirst administrator created: username "${cloudly.config.adminUsername}", password "${cloudly.generatedAdminPassword}"\n`
        + 'It is shown only this once; set CLOUDLY_ADMIN_PASSWORD to choose it yourself.\n\n',
    );
  }
  // A promise nobody awaited must not end a server that holds every cluster's socket: the failure
  // is logged with an error id and Cloudly keeps serving. (Node's default is to exit.)
  process.on('unhandledRejection', (reasonArg) => {
    cloudly.logInternalFailure(reasonArg, 'unhandled rejection');
  });
};

void main();
