import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import type { Command } from 'commander';
import { setExitCode } from './io.js';
import { exitCodes, reportFailure, resolveContext, UsageError } from './context.js';
import type { IncomingMessage } from 'node:http';
import { CloudlyRefusal } from '../core/refusal.js';
import { printAnswer, writeErr } from './output.js';
import { formatBytes } from './progress.js';

/**
 * `cloudly snapshot save <file>` (online: a consistent copy of the embedded database through the
 * API, by an administrator) and `cloudly snapshot restore <file> --data-dir <dir>` (offline: into
 * an empty data directory). docs/storage.md, "Saving and restoring the control plane".
 */

/**
 * The embedded database's file code, loaded by the two commands that use it: it reads BSON through
 * the mongodb driver, which every other command would otherwise load at start for nothing.
 */
const loadFileTools = async () => {
  const [{ syncDirectory, writeFully }, { verifySnapshotFile }, { snapshotFileNames }] = await Promise.all([
    import('../core/durablefiles.js'),
    import('../core/snapshotfile.js'),
    import('../core/storageverify.js'),
  ]);
  return { syncDirectory, writeFully, verifySnapshotFile, snapshotFileNames };
};

/** A failure with a message for the operator; exit code 1 (3 when the server cannot be reached). */
class SnapshotError extends Error {
  constructor(message: string, public readonly exitCode: number = exitCodes.refused) {
    super(message);
  }
}

const save = async (fileArg: string, optionsArg: { url?: string; output?: string; context?: string }): Promise<Record<string, unknown>> => {
  const { syncDirectory, writeFully, verifySnapshotFile } = await loadFileTools();
  const { context: stored } = await resolveContext(optionsArg);
  const url = stored.server;
  const target = path.resolve(fileArg);
  if (fs.existsSync(target)) {
    throw new UsageError(`${target} exists; give a new file name`);
  }
  const { openGet, readAnswerText } = await import('../client/transport.js');
  let response: IncomingMessage;
  try {
    response = await openGet(`${url}/admin/snapshot`, { authorization: `Bearer ${stored.identity.jwt}` });
  } catch (error) {
    if (error instanceof CloudlyRefusal) {
      // Refused before anything was sent (plain http to a remote host): the refusal as every command prints it.
      throw error;
    }
    throw new SnapshotError(`cannot reach ${url}: ${(error as Error).message}`, exitCodes.unavailable);
  }
  const status = response.statusCode ?? 0;
  if (status !== 200) {
    const text = await readAnswerText(response).catch(() => '');
    let reason = text;
    try {
      // The refusal shape: its reason tokens, then the sentences for people.
      const error = (JSON.parse(text) as { error?: { data?: { reasons?: unknown; causes?: unknown } } | string }).error;
      if (typeof error === 'string') {
        reason = error;
      } else if (error?.data) {
        const reasons = Array.isArray(error.data.reasons) ? error.data.reasons.map(String) : [];
        const causes = Array.isArray(error.data.causes)
          ? (error.data.causes as Array<{ path?: unknown; message?: unknown }>).map((causeArg) => `${typeof causeArg?.path === 'string' ? `${causeArg.path}: ` : ''}${String(causeArg?.message)}`)
          : [];
        reason = [...reasons, ...causes].join('; ') || text;
      }
    } catch {
      // not JSON: the text itself
    }
    throw new SnapshotError(`refused (HTTP ${status}): ${reason}${status === 401 ? ' (log in again: cloudly login)' : ''}`,
      status === 503 ? exitCodes.unavailable : exitCodes.refused);
  }
  const documents = Number(response.headers['x-cloudly-snapshot-documents']);
  const lsn = Number(response.headers['x-cloudly-snapshot-lsn']);
  const temporary = `${target}.${process.pid}.partial`;
  const handle = await fsp.open(temporary, 'wx', 0o600);
  let bytes = 0;
  let lastReport = 0;
  try {
    for await (const chunk of response as AsyncIterable<Uint8Array>) {
      await writeFully(handle, chunk, bytes);
      bytes += chunk.byteLength;
      if (Date.now() - lastReport >= 1000) {
        lastReport = Date.now();
        writeErr(`snapshot: ${formatBytes(bytes)} received (${documents} documents at record ${lsn})`);
      }
    }
    await handle.sync();
  } catch (error) {
    await handle.close().catch(() => undefined);
    await fsp.rm(temporary, { force: true });
    throw new SnapshotError(`the download broke off after ${formatBytes(bytes)}: ${(error as Error).message}; nothing was saved`, exitCodes.unavailable);
  }
  await handle.close();
  try {
    // The file is what a restore will trust: checked frame by frame before it gets its name.
    const summary = await verifySnapshotFile(temporary, null);
    if (summary.lsn !== lsn || summary.documents !== documents) {
      throw new Error(`it holds ${summary.documents} documents at record ${summary.lsn}, the server announced ${documents} at ${lsn}`);
    }
  } catch (error) {
    await fsp.rm(temporary, { force: true });
    throw new SnapshotError(`the downloaded snapshot is not intact (${(error as Error).message}); nothing was saved`);
  }
  await fsp.rename(temporary, target);
  await syncDirectory(path.dirname(target));
  writeErr(`snapshot: saved ${formatBytes(bytes)}`);
  return { file: target, lsn, documents, bytes };
};

export const restoreSnapshotFile = async (fileArg: string, dataDirArg: string): Promise<Record<string, unknown>> => {
  const { syncDirectory, writeFully, verifySnapshotFile, snapshotFileNames } = await loadFileTools();
  const source = path.resolve(fileArg);
  const dataDir = path.resolve(dataDirArg);
  let summary;
  try {
    summary = await verifySnapshotFile(source);
  } catch (error) {
    throw new SnapshotError(`${source} is not an intact snapshot: ${(error as Error).message}; nothing was restored`);
  }
  const existing = fs.existsSync(dataDir) ? await fsp.readdir(dataDir) : [];
  // Keys alone may be there already: the key-encryption key is copied in before the restore.
  const inTheWay = existing.filter((name) => name !== 'keys');
  if (inTheWay.length > 0) {
    throw new SnapshotError(`${dataDir} is not empty (${inTheWay.slice(0, 5).join(', ')}${inTheWay.length > 5 ? ', …' : ''}); restore only into an empty data directory, nothing was changed`);
  }
  await fsp.mkdir(dataDir, { recursive: true, mode: 0o700 });
  const temporary = path.join(dataDir, `${snapshotFileNames.current}.${process.pid}.tmp`);
  const bytes = await fsp.readFile(source);
  const handle = await fsp.open(temporary, 'wx', 0o600);
  try {
    await writeFully(handle, bytes, 0);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await verifySnapshotFile(temporary, { lsn: summary.lsn, documents: summary.documents, frames: summary.frames, bytes: summary.bytes });
  } catch (error) {
    await fsp.rm(temporary, { force: true });
    throw new SnapshotError(`the copy in ${dataDir} did not read back intact (${(error as Error).message}); nothing was restored`);
  }
  await fsp.rename(temporary, path.join(dataDir, snapshotFileNames.current));
  await syncDirectory(dataDir);
  const keyPresent = fs.existsSync(path.join(dataDir, 'keys', 'secrets-key-encryption-key'));
  return {
    dataDir, lsn: summary.lsn, documents: summary.documents, bytes: summary.bytes,
    keyEncryptionKey: keyPresent ? 'present in the data directory' : 'not in the data directory: copy keys/secrets-key-encryption-key from the saved Cloudly, or set CLOUDLY_SECRETS_KEY_FILE, before starting',
  };
};

export const addSnapshotCommands = (programArg: Command): void => {
  const snapshot = programArg.command('snapshot').description('save the control plane (embedded database) to a file, and restore it into an empty data directory');
  snapshot.command('save')
    .description('download a consistent snapshot of the whole control plane through the API (an administrator, logged in); verified before it is kept')
    .argument('<file>', 'where to write it (must not exist)')
    .action(async (fileArg: string, _options: unknown, commandArg: Command) => {
      const options = commandArg.optsWithGlobals() as { url?: string; output: 'table' | 'json' | 'yaml' };
      await runSnapshotCommand(() => save(fileArg, options), options.output,
        (answerArg) => `saved ${answerArg.file}: ${answerArg.documents} documents at record ${answerArg.lsn}, ${answerArg.bytes} bytes`);
    });
  snapshot.command('restore')
    .description('offline: write a saved snapshot into an empty data directory, from which Cloudly then starts')
    .argument('<file>', 'a file written by `cloudly snapshot save`')
    .requiredOption('--data-dir <dir>', 'the empty data directory to restore into')
    .action(async (fileArg: string, _options: unknown, commandArg: Command) => {
      const options = commandArg.optsWithGlobals() as { dataDir: string; output: 'table' | 'json' | 'yaml' };
      await runSnapshotCommand(() => restoreSnapshotFile(fileArg, options.dataDir), options.output,
        (answerArg) => `restored ${answerArg.documents} documents (record ${answerArg.lsn}) into ${answerArg.dataDir}\nkey-encryption key: ${answerArg.keyEncryptionKey}`);
    });
};

const runSnapshotCommand = async (
  workArg: () => Promise<Record<string, unknown>>,
  formatArg: 'table' | 'json' | 'yaml',
  tableArg: (answerArg: Record<string, any>) => string,
): Promise<void> => {
  try {
    const answer = await workArg();
    printAnswer(answer, formatArg, () => tableArg(answer));
  } catch (error) {
    if (error instanceof UsageError || error instanceof CloudlyRefusal) {
      setExitCode(reportFailure(error));
      return;
    }
    writeErr(`cloudly: ${(error as Error).message}`);
    setExitCode(error instanceof SnapshotError ? error.exitCode : exitCodes.refused);
  }
};
