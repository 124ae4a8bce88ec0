import { readSimConfig, SimConfigError, simUsage } from './config.js';
import { lineLogger, SimFleet } from './fleet.js';

/**
 * `cloudly-sim`: reads the configuration (exit 2 with every reason when it makes no sense), starts
 * the fleet, prints a summary line when every cluster registered, and on SIGTERM or SIGINT closes
 * every relay socket with a normal close code (1000) and exits 0.
 */
const main = async (): Promise<void> => {
  let parsed;
  try {
    parsed = readSimConfig(process.argv.slice(2));
  } catch (error) {
    if (error instanceof SimConfigError) {
      process.stderr.write(`cloudly-sim: refused:\n${error.reasons.map((reasonArg) => `  - ${reasonArg}`).join('\n')}\nRun cloudly-sim --help for every option.\n`);
      process.exit(2);
    }
    throw error;
  }
  if (parsed.help) {
    process.stdout.write(simUsage);
    return;
  }
  const config = parsed.config;
  const log = lineLogger(config.logFormat, (lineArg) => process.stdout.write(lineArg));
  const fleet = new SimFleet(config, log);
  let stopping = false;
  const stop = (signalArg: string) => {
    if (stopping) {
      return;
    }
    stopping = true;
    log({ signal: signalArg, clusters: fleet.clusters.length }, 'stopping: closing every relay socket');
    void fleet.stop().then(() => {
      log({ counters: fleet.counters }, 'stopped');
      process.exit(0);
    });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  log({ url: config.url, clusters: config.bootstrap ? config.clusters : config.tokens.length, nodes: config.nodes, seed: config.seed }, 'cloudly-sim starting');
  try {
    await fleet.start();
  } catch (error) {
    if (stopping) {
      return;
    }
    const data = (error as { errorData?: unknown }).errorData;
    process.stderr.write(`cloudly-sim: could not start: ${data ? JSON.stringify(data) : (error as Error).message}\n`);
    await fleet.stop();
    process.exit(1);
  }
  if (!stopping) {
    log({ states: fleet.states() }, 'every cluster started');
  }
};

void main();
