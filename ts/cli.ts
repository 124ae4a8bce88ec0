import { Cloudly } from './classes.cloudly.js';
import { ConfigError } from './config.js';
import { DataDirectoryLockedError, StorageDamagedError } from './core/database.js';
import { TlsMaterialError } from './core/tls.js';

/** `npm start` (through bin/cloudly-server, which passes the node flags): read the configuration, start Cloudly, stop it gracefully on SIGTERM/SIGINT. */
const main = async (): Promise<void> => {
  let cloudly: Cloudly;
  try {
    cloudly = new Cloudly();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`cloudly: configuration error: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  try {
    await cloudly.start();
  } catch (error) {
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
  let stopping = false;
  const shutdown = (signalArg: 'SIGTERM' | 'SIGINT'): void => {
    if (stopping) {
      // A second signal: the operator will not wait for the grace. Every acknowledged write is
      // already in the journal, so ending now loses none; the next start replays it.
      process.stderr.write(`cloudly: second ${signalArg} while stopping: stopping at once\n`);
      process.exit(signalArg === 'SIGTERM' ? 143 : 130);
    }
    stopping = true;
    cloudly.logger.info({ signal: signalArg, graceMs: cloudly.config.shutdownGraceMs }, 'stopping');
    cloudly.stop().then(() => process.exit(0), (error: unknown) => {
      process.stderr.write(`cloudly: stop failed: ${(error as Error).message}\n`);
      process.exit(1);
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  // A promise nobody awaited must not end a server that holds every cluster's socket: the failure
  // is logged with an error id and Cloudly keeps serving. (Node's default is to exit.)
  process.on('unhandledRejection', (reasonArg) => {
    cloudly.logInternalFailure(reasonArg, 'unhandled rejection');
  });
};

void main();
