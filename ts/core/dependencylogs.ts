import { logger as smartdataLogger } from '@push.rocks/smartdata/dist_ts/logging.js';
import type { TCloudlyLogger } from './logger.js';

/**
 * smartdata writes its own lines straight to the console (`__# debug: called svDb() on …` for
 * every decorated member, `__# info: disconnected …`), which breaks Cloudly's one-JSON-object-a-
 * line log and is noise on a terminal. Its logger is one shared object: from the moment this
 * module is loaded (database.ts loads it before any document class is declared, and ts/cli.ts
 * before anything else, since a bundle evaluates packages before its own modules) its lines go to
 * Cloudly's logger instead, as `debug` lines marked with the dependency, and nowhere before a
 * Cloudly exists.
 */

let sink: TCloudlyLogger | null = null;

/** Sends smartdata's lines to `loggerArg` (the latest Cloudly in this process). */
export const routeDependencyLogs = (loggerArg: TCloudlyLogger): void => {
  sink = loggerArg;
};

smartdataLogger.log = (levelArg: string, messageArg: string): void => {
  // Its lines describe its own internals (decorators, connections); Cloudly logs what matters
  // about the database itself, so they are debug lines whatever level smartdata gave them.
  sink?.debug({ dependency: '@push.rocks/smartdata', dependencyLevel: levelArg }, String(messageArg));
};
