/**
 * Relay conformance kit: checks a relay implementation against docs/relay-protocol.md, through
 * Cloudly's public surface only (an administrator's calls and the relay's own socket).
 *
 *   npm run relay-conformance -- --relay-command 'node my-relay.js'
 *   npm run relay-conformance -- --url http://127.0.0.1:3000 --admin-password '…' [--relay-command …]
 *
 * Without --url it starts a Cloudly in this process on a temporary data directory (pinging every
 * 500 ms, so liveness is checked quickly). It creates a cluster and starts the relay command with
 * CLOUDLY_URL and CLOUDLY_RELAY_TOKEN in its environment; without --relay-command it prints both
 * and waits for a relay to connect. Against --url it creates a cluster, a service and backups
 * there: use a Cloudly meant for testing. Every check prints pass or fail with the reason;
 * the exit code is the number of failed checks (at most 100).
 */
import { followOperation, outcomeOf } from '../ts/client/operations.js';
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { Cloudly } from '../ts/classes.cloudly.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import type { ITypedContract } from '../ts/interfaces/requests/admin.js';
import { requireValidRelayAnswer } from '../ts/core/relaycalls.js';
import { validatePruneClusterNodeArchiveAnswer } from '../ts/manager.backup/relayanswers.js';

type TAnyCall = ITypedContract<string, any, any>;

export interface IConformanceCheck {
  name: string;
  ok: boolean;
  detail: string;
}

/** A started relay the kit stops when it is done. */
export interface IRelayUnderTest {
  stop(): Promise<void>;
}

export interface IRelayConformanceOptions {
  /** A running Cloudly; absent = start one in this process. */
  url?: string;
  adminUsername?: string;
  adminPassword?: string;
  /** Starts the relay with the cluster's URL and token; absent = the relay is started by hand. */
  startRelay?: (environmentArg: { url: string; token: string }) => Promise<IRelayUnderTest>;
  /** How long the relay may take to connect, register and report (default 30 s). */
  waitMs?: number;
  /** Also run an isolated restore (prepare, stage, status, execute, cleanup) on the reported node. */
  isolatedRestore?: boolean;
  /** Told about every check as it finishes, and about the cluster before the relay starts. */
  report?: (lineArg: string) => void;
}

const sleep = (msArg: number) => new Promise((resolve) => setTimeout(resolve, msArg));

/** A refusal as the administrator sees it: code, reasons and the relay's own error, if any. */
const describeFailure = (errorArg: unknown): string => {
  const data = (errorArg as { errorData?: unknown }).errorData;
  return data ? JSON.stringify(data) : String((errorArg as Error)?.message ?? errorArg);
};

export const runRelayConformance = async (optionsArg: IRelayConformanceOptions = {}): Promise<IConformanceCheck[]> => {
  const report = optionsArg.report ?? (() => undefined);
  const waitMs = optionsArg.waitMs ?? 30_000;
  const checks: IConformanceCheck[] = [];
  const record = (nameArg: string, okArg: boolean, detailArg: string): boolean => {
    checks.push({ name: nameArg, ok: okArg, detail: detailArg });
    report(`${okArg ? 'pass' : 'FAIL'}  ${nameArg}${detailArg ? ` — ${detailArg}` : ''}`);
    return okArg;
  };
  const check = async (nameArg: string, fnArg: () => Promise<string>): Promise<boolean> => {
    try {
      return record(nameArg, true, await fnArg());
    } catch (error) {
      return record(nameArg, false, describeFailure(error));
    }
  };

  let cloudly: Cloudly | null = null;
  let dataDir: string | null = null;
  let relay: IRelayUnderTest | null = null;
  const pingIntervalMs = optionsArg.url ? 5_000 : 500;
  let baseUrl = optionsArg.url ?? '';
  let adminUsername = optionsArg.adminUsername ?? 'admin';
  let adminPassword = optionsArg.adminPassword ?? '';
  try {
    if (!optionsArg.url) {
      dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-conformance-'));
      adminUsername = 'admin';
      adminPassword = randomBytes(18).toString('base64url');
      cloudly = new Cloudly({
        config: {
          port: 0, host: '127.0.0.1', mongoDbUrl: null, dataDir, adminUsername, adminPassword,
          logLevel: 'warn', socketPingIntervalMs: pingIntervalMs,
        },
        logDestination: new Writable({ write: (_chunk, _encoding, callbackArg) => callbackArg() }),
      });
      await cloudly.start();
      baseUrl = cloudly.baseUrl;
    }
    const admin = new CloudlyAdminClient(baseUrl);
    await admin.login(adminUsername, adminPassword);
    const call = (methodArg: string, requestArg: Record<string, unknown>): Promise<any> => admin.call<TAnyCall>(methodArg, requestArg);
    /** Backups and restores answer an operation at once: followed to its end, answered as its outcome. */
    const callToEnd = async (methodArg: string, requestArg: Record<string, unknown>): Promise<any> =>
      outcomeOf(await followOperation(admin, (await call(methodArg, requestArg)).operation.operationId, { timeoutMs: 15 * 60_000, pollMs: 200 }));

    const { cluster, relayToken } = await call('createCluster', { name: `conformance-${randomBytes(3).toString('hex')}` });
    const clusterId: string = cluster.id;
    if (optionsArg.startRelay) {
      report(`cluster ${clusterId} at ${baseUrl}: starting the relay`);
      relay = await optionsArg.startRelay({ url: baseUrl, token: relayToken });
    } else {
      // Started by hand: the token is shown so the relay can be given it (a throwaway cluster).
      report(`cluster ${clusterId}: start your relay with CLOUDLY_URL=${baseUrl} CLOUDLY_RELAY_TOKEN=${relayToken}`);
    }

    const registration = async () => (await call('getClusterRelayRegistrations', { clusterIds: [clusterId] })).registrations[0];
    const waitUntil = async (predicateArg: () => Promise<boolean>): Promise<boolean> => {
      const deadline = Date.now() + waitMs;
      while (Date.now() < deadline) {
        if (await predicateArg()) {
          return true;
        }
        await sleep(100);
      }
      return false;
    };

    // 1. Connect, authenticate and register (sections 1, 2 and 7).
    const registered = await waitUntil(async () => (await registration())?.connected === true);
    record('connects with its token and registers (registerClusterRelay)', registered,
      registered ? '' : `no connected registration within ${waitMs} ms: open /typedsocket with Authorization: Bearer <token>, then call registerClusterRelay`);
    if (!registered) {
      return checks;
    }
    const firstRegistration = await registration();

    // 2. Report a node (reportClusterNode).
    let nodeId: string | null = null;
    const reported = await waitUntil(async () => {
      const { nodes } = await call('getClusterNodes', { clusterId });
      nodeId = nodes.find((node: { source: string }) => node.source === 'relay-report')?.id ?? null;
      return nodeId !== null;
    });
    record('reports its nodes (reportClusterNode)', reported, reported ? `node ${nodeId}` : 'no node reported; the kit adds one itself to go on');
    if (!nodeId) {
      nodeId = 'conformance-node';
      await call('addClusterNode', { clusterId, name: nodeId, nodeId });
    }

    // 3. Cloudly → relay calls of each timeout class, with answers of the documented shapes.
    await check('answers getClusterCorestoreLegacyResources (ordinary class) with an inventory', async () => {
      const { inventory } = await call('getCorestoreLegacyResources', { clusterId, nodeId });
      return `reachable: ${inventory.reachable}`;
    });
    await check('answers pruneClusterNodeArchive (archive class, dry run) with { found, result? }', async () => {
      const request = { nodeId, retention: { keepLast: 1000 }, dryRun: true };
      if (cloudly) {
        // The relay's own dry run, asked directly: an administrator's dryRun would not reach it.
        const answer = await cloudly.relays.call<Record<string, unknown>>(clusterId, 'pruneClusterNodeArchive', request);
        requireValidRelayAnswer(validatePruneClusterNodeArchiveAnswer(answer));
        return `found: ${answer.found}`;
      }
      const answer = await call('adminPruneClusterNodeArchive', { clusterId, ...request });
      return `found: ${answer.found}`;
    });
    if (cloudly) {
      await check('refuses a method it does not serve with an error envelope', async () => {
        try {
          await cloudly!.relays.call(clusterId, 'relayConformanceUnknownMethod', {});
        } catch (error) {
          const data = (error as { errorData?: { reasons?: string[]; relayError?: { code: string | null } } }).errorData;
          if (data?.reasons?.[0] === 'relay-refused' && data.relayError?.code) {
            return `relay code ${data.relayError.code}`;
          }
          throw error;
        }
        throw new Error('the relay answered an unknown method as if it served it');
      });
    }

    // 4. Backup with the closure upload (section 8.3), then restore (section 8.4).
    const { service } = await call('createService', {
      service: {
        name: `conformance-${randomBytes(3).toString('hex')}`,
        organizationId: 'conformance',
        clusterId,
        runtime: { image: 'registry.example/conformance:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [nodeId] } },
        volumes: [],
      },
    });
    const backupId = `conformance-${randomUUID()}`;
    const backedUp = await check('backs up a service (backupClusterService) and uploads its closure until the receipt', async () => {
      const { backup } = await callToEnd('createServiceBackup', { clusterId, nodeId, serviceId: service.id, backupId });
      if (!backup.closure) {
        throw new Error(`the backup completed with ${backup.snapshots.length} snapshots but no stored closure: call backupServiceDatabaseClosure and stream the bytes before answering`);
      }
      return `${backup.snapshots.length} snapshots, closure of ${backup.closure.descriptor.byteLength} bytes`;
    });
    if (backedUp) {
      await check('restores the backup (restoreClusterService)', async () => {
        const { restored } = await callToEnd('restoreServiceBackup', { backupId });
        return `${restored.length} snapshots restored`;
      });
    }
    if (backedUp && optionsArg.isolatedRestore) {
      await check('runs an isolated restore: prepare, stage the closure (section 8.5), status, execute, cleanup', async () => {
        const restoreId = `conformance-${randomUUID()}`;
        const mappings = [{
          type: 'database',
          source: { resourceName: 'db', databaseName: 'app' },
          target: {
            resourceName: 'scratch', databaseName: 'app_conformance',
            databaseAllocation: { purpose: 'scratch-rehearsal', rehearsalId: 'conformance', allocationId: 'a'.repeat(64), generation: 1, bindingSha256: 'b'.repeat(64), receiptSha256: 'c'.repeat(64) },
          },
        }];
        const created = await callToEnd('createIsolatedRestore', { backupId, targetNodeName: nodeId, restoreId, mappings });
        const status = await call('stepIsolatedRestore', { restoreId, operation: 'status' });
        const executed = await call('stepIsolatedRestore', { restoreId, operation: 'execute', expectedRevision: status.state.revision });
        const cleaned = await call('stepIsolatedRestore', { restoreId, operation: 'cleanup', expectedRevision: executed.state.revision });
        return `${created.state.phase} → ${executed.state.phase} → ${cleaned.state.phase}`;
      });
    }

    // 5. Liveness (section 3): idle for more than Cloudly's ping window, on the same socket.
    await sleep(pingIntervalMs * 4);
    const after = await registration();
    record('answers pings and keeps its socket while idle', after?.connected === true && after.generation === firstRegistration.generation,
      after?.connected !== true
        ? 'the relay lost its socket while idle: keep reading the socket so pings are answered'
        : after.generation !== firstRegistration.generation ? 'the relay registered again: it reconnected while idle' : '');
    return checks;
  } finally {
    await relay?.stop().catch(() => undefined);
    await cloudly?.stop();
    if (dataDir) {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  }
};

const usage = `npm run relay-conformance -- [--url URL --admin-password PW [--admin-user NAME]] [--relay-command CMD] [--wait-ms MS] [--isolated-restore]`;

const readArguments = (argvArg: string[]): Record<string, string | true> => {
  const parsed: Record<string, string | true> = {};
  for (let index = 0; index < argvArg.length; index++) {
    const name = argvArg[index];
    if (!name.startsWith('--')) {
      throw new Error(`unexpected argument ${name}\n${usage}`);
    }
    const next = argvArg[index + 1];
    if (next === undefined || next.startsWith('--')) {
      parsed[name.slice(2)] = true;
    } else {
      parsed[name.slice(2)] = next;
      index++;
    }
  }
  return parsed;
};

const main = async (): Promise<void> => {
  const args = readArguments(process.argv.slice(2));
  if (args.help) {
    process.stdout.write(`${usage}\n`);
    return;
  }
  const text = (nameArg: string): string | undefined => (typeof args[nameArg] === 'string' ? args[nameArg] as string : undefined);
  const relayCommand = text('relay-command');
  const checks = await runRelayConformance({
    url: text('url'),
    adminUsername: text('admin-user'),
    adminPassword: text('admin-password'),
    waitMs: text('wait-ms') ? Number(text('wait-ms')) : undefined,
    isolatedRestore: args['isolated-restore'] === true,
    report: (lineArg) => process.stdout.write(`${lineArg}\n`),
    startRelay: relayCommand
      ? async ({ url, token }) => {
        const child = spawn(relayCommand, { shell: true, stdio: 'inherit', env: { ...process.env, CLOUDLY_URL: url, CLOUDLY_RELAY_TOKEN: token } });
        return {
          stop: async () => {
            if (child.exitCode === null) {
              child.kill('SIGTERM');
            }
          },
        };
      }
      : undefined,
  });
  const failed = checks.filter((entry) => !entry.ok).length;
  process.stdout.write(`${checks.length - failed} passed, ${failed} failed\n`);
  process.exitCode = Math.min(failed, 100);
};

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 101;
  });
}
