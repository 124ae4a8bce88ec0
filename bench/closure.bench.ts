/**
 * Closure streaming benchmark: relay → Cloudly → durable blob store, and back, against raw
 * binary WebSocket frames between the same two processes in the same run.
 *
 *   node --import tsx bench/closure.bench.ts [sizeMiB]        (default 1024 = 1 GiB)
 *   CLOSURE_BENCH_MIB=256 node --import tsx bench/closure.bench.ts
 *
 * The server runs in a child process so its peak RSS is its own; the parent plays the relay.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { IReq_Cloudly_Relay_BackupClusterService } from '../ts/interfaces/requests/backup.js';

const mebibyte = 1024 * 1024;
const frameBytes = 256 * 1024;
const patternBytes = 4 * mebibyte;

interface IServerReady {
  kind: 'ready';
  baseUrl: string;
  relayToken: string;
  clusterId: string;
  nodeId: string;
  serviceId: string;
  rawPort: number;
}

type TParentMessage =
  | { kind: 'reset-peak' }
  | { kind: 'report-peak' }
  | { kind: 'stop' }
  | { kind: 'raw-send'; bytes: number }
  | { kind: 'order-backup' };
type TChildMessage =
  | IServerReady
  | { kind: 'peak'; rssBytes: number }
  | { kind: 'stopped' }
  | { kind: 'backup-done'; error?: string };

// ---------------------------------------------------------------- server child

const runServer = async (): Promise<void> => {
  const { Cloudly } = await import('../ts/classes.cloudly.js');
  const { CloudlyAdminClient } = await import('../ts/client/admin.js');
  const { Writable } = await import('node:stream');
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-closure-bench-'));
  const password = randomBytes(16).toString('hex');
  const cloudly = new Cloudly({
    config: { port: 0, host: '127.0.0.1', mongoDbUrl: null, dataDir, adminUsername: 'admin', adminPassword: password, logLevel: 'warn' },
    logDestination: new Writable({ write: (_chunk, _encoding, callback) => callback() }),
  });
  await cloudly.start();
  const admin = new CloudlyAdminClient(cloudly.baseUrl);
  await admin.login('admin', password);
  const { cluster, relayToken } = await admin.call('createCluster', { name: 'bench' }) as { cluster: { id: string }; relayToken: string };
  await admin.call('addClusterNode', { clusterId: cluster.id, name: 'bench-node', nodeId: 'bench-node' });
  const { service } = await admin.call('createService', {
    service: {
      name: 'bench-db', organizationId: 'org', clusterId: cluster.id,
      runtime: { image: 'bench:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } }, volumes: [],
    },
  }) as { service: { id: string } };

  // The raw baseline: a bare ws server that counts what arrives and can send the same amount back.
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, maxPayload: 64 * mebibyte });
  await new Promise<void>((resolve) => wss.once('listening', resolve));
  let rawSocket: WebSocket | null = null;
  wss.on('connection', (socket) => {
    rawSocket = socket;
    let received = 0;
    socket.on('message', (data, isBinary) => {
      if (!isBinary) {
        received = 0;
        return;
      }
      received += (data as Buffer).byteLength;
      if (received >= Number(process.env.CLOSURE_BENCH_BYTES)) {
        socket.send('done');
      }
    });
  });

  let peak = process.memoryUsage.rss();
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 20);
  const send = (messageArg: TChildMessage): void => {
    process.send!(messageArg);
  };
  process.on('message', async (messageArg: TParentMessage) => {
    if (messageArg.kind === 'reset-peak') {
      peak = process.memoryUsage.rss();
    } else if (messageArg.kind === 'report-peak') {
      peak = Math.max(peak, process.memoryUsage.rss());
      send({ kind: 'peak', rssBytes: peak });
    } else if (messageArg.kind === 'raw-send' && rawSocket) {
      const frame = randomBytes(frameBytes);
      for (let sent = 0; sent < messageArg.bytes; sent += frameBytes) {
        await new Promise<void>((resolve, reject) => rawSocket!.send(frame, { binary: true }, (error) => (error ? reject(error) : resolve())));
      }
    } else if (messageArg.kind === 'order-backup') {
      // An administrator orders the backup; Cloudly then calls the relay, which streams the closure.
      try {
        await admin.call('createServiceBackup', {
          clusterId: cluster.id, nodeId: 'bench-node', serviceId: service.id, backupId: 'bench-backup',
        });
        send({ kind: 'backup-done' });
      } catch (error) {
        send({ kind: 'backup-done', error: String((error as { errorData?: unknown }).errorData ? JSON.stringify((error as { errorData?: unknown }).errorData) : error) });
      }
    } else if (messageArg.kind === 'stop') {
      clearInterval(sampler);
      wss.close();
      await cloudly.stop();
      await fsp.rm(dataDir, { recursive: true, force: true });
      send({ kind: 'stopped' });
      process.exit(0);
    }
  });
  send({
    kind: 'ready', baseUrl: cloudly.baseUrl, relayToken, clusterId: cluster.id, nodeId: 'bench-node',
    serviceId: service.id, rawPort: (wss.address() as AddressInfo).port,
  });
};

// ---------------------------------------------------------------- relay parent

const nextMessage = <T extends TChildMessage['kind']>(childArg: ChildProcess, kindArg: T): Promise<Extract<TChildMessage, { kind: T }>> =>
  new Promise((resolve) => {
    const listener = (messageArg: TChildMessage): void => {
      if (messageArg.kind === kindArg) {
        childArg.off('message', listener);
        resolve(messageArg as Extract<TChildMessage, { kind: T }>);
      }
    };
    childArg.on('message', listener);
  });

async function* patternStream(patternArg: Buffer, totalArg: number): AsyncIterable<Buffer> {
  for (let sent = 0; sent < totalArg; sent += patternArg.byteLength) {
    yield totalArg - sent >= patternArg.byteLength ? patternArg : patternArg.subarray(0, totalArg - sent);
  }
}

const mibPerSecond = (bytesArg: number, startedArg: bigint): number =>
  (bytesArg / mebibyte) / (Number(process.hrtime.bigint() - startedArg) / 1e9);

const runRelay = async (): Promise<void> => {
  const sizeMiB = Number(process.argv[2] ?? process.env.CLOSURE_BENCH_MIB ?? 1024);
  if (!Number.isSafeInteger(sizeMiB) || sizeMiB < 1) {
    throw new Error('size must be a whole number of MiB');
  }
  const totalBytes = sizeMiB * mebibyte;
  const child = fork(fileURLToPath(import.meta.url), ['--server'], {
    execArgv: ['--import', 'tsx', ...(process.env.CLOSURE_BENCH_CHILD_FLAGS ?? '').split(' ').filter(Boolean)],
    env: { ...process.env, CLOSURE_BENCH_BYTES: String(totalBytes), MONGOMS_DISABLE_POSTINSTALL: '1' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const ready = await nextMessage(child, 'ready');
  const command = (messageArg: TParentMessage): void => {
    child.send(messageArg);
  };
  const peakRss = async (): Promise<number> => {
    command({ kind: 'report-peak' });
    return (await nextMessage(child, 'peak')).rssBytes;
  };
  command({ kind: 'reset-peak' });
  const idleRss = await peakRss();

  // Raw binary frames, relay → server and back, between the same two processes.
  const raw = new WebSocket(`ws://127.0.0.1:${ready.rawPort}`, { maxPayload: 64 * mebibyte });
  await new Promise<void>((resolve, reject) => {
    raw.once('open', resolve);
    raw.once('error', reject);
  });
  const frame = randomBytes(frameBytes);
  const rawDone = new Promise<void>((resolve) => raw.once('message', () => resolve()));
  let started = process.hrtime.bigint();
  for (let sent = 0; sent < totalBytes; sent += frameBytes) {
    await new Promise<void>((resolve, reject) => raw.send(frame, { binary: true }, (error) => (error ? reject(error) : resolve())));
  }
  await rawDone;
  const rawUp = mibPerSecond(totalBytes, started);
  let rawReceived = 0;
  const rawDownDone = new Promise<void>((resolve) => raw.on('message', (data, isBinary) => {
    if (isBinary) {
      rawReceived += (data as Buffer).byteLength;
      if (rawReceived >= totalBytes) {
        resolve();
      }
    }
  }));
  started = process.hrtime.bigint();
  command({ kind: 'raw-send', bytes: totalBytes });
  await rawDownDone;
  const rawDown = mibPerSecond(totalBytes, started);
  raw.close();

  // The closure: a repeated random pattern, hashed up front because the descriptor goes first.
  const { CloudlyRelayClient } = await import('../ts/client/relay.js');
  const { fetchServiceDatabaseClosure, sendServiceDatabaseClosure } = await import('../ts/client/relayclosures.js');
  const pattern = randomBytes(patternBytes);
  const hash = createHash('sha256');
  for await (const chunk of patternStream(pattern, totalBytes)) {
    hash.update(chunk);
  }
  const sha256 = hash.digest('hex');
  const descriptor = {
    format: 'corestore-database-closure-v1' as const,
    byteLength: totalBytes,
    sha256,
    receipt: { receiptId: 'bench-export', receiptSha256: sha256 },
  };
  const relay = await CloudlyRelayClient.connect(ready.baseUrl, ready.relayToken, { timeoutMs: 60 * 60_000 });
  let uploadMiBs = 0;
  let uploadPeak = 0;
  relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (requestArg) => {
    command({ kind: 'reset-peak' });
    const uploadStarted = process.hrtime.bigint();
    const sent = await sendServiceDatabaseClosure(relay, {
      backupId: requestArg.backupId, serviceId: requestArg.service.id, nodeId: requestArg.nodeId, descriptor,
    }, patternStream(pattern, totalBytes));
    uploadMiBs = mibPerSecond(totalBytes, uploadStarted);
    uploadPeak = await peakRss();
    if (sent.receipt?.sha256 !== sha256) {
      throw new Error('receipt does not match the closure');
    }
    return { snapshots: [] };
  });
  command({ kind: 'order-backup' });
  const ordered = await nextMessage(child, 'backup-done');
  if (ordered.error) {
    throw new Error(`backup failed: ${ordered.error}`);
  }

  command({ kind: 'reset-peak' });
  started = process.hrtime.bigint();
  const fetched = await fetchServiceDatabaseClosure(relay, { backupId: 'bench-backup', serviceId: ready.serviceId, nodeId: ready.nodeId });
  let downloaded = 0;
  for await (const chunk of fetched.bytes) {
    downloaded += chunk.byteLength;
  }
  const downloadMiBs = mibPerSecond(downloaded, started);
  const downloadPeak = await peakRss();
  relay.close();
  command({ kind: 'stop' });
  await nextMessage(child, 'stopped');

  const percent = (valueArg: number, baseArg: number): string => `${((valueArg / baseArg) * 100).toFixed(0)}%`;
  const mb = (bytesArg: number): string => `${(bytesArg / 1e6).toFixed(0)} MB`;
  console.log(`closure size: ${sizeMiB} MiB (${os.cpus().length} cores); server RSS when idle after start: ${mb(idleRss)}`);
  console.log(`raw ws frames  relay → server: ${rawUp.toFixed(1)} MiB/s   server → relay: ${rawDown.toFixed(1)} MiB/s`);
  console.log(`closure backup relay → Cloudly → fsynced blob: ${uploadMiBs.toFixed(1)} MiB/s (${percent(uploadMiBs, rawUp)} of raw), peak server RSS ${mb(uploadPeak)}`);
  console.log(`closure restore blob → Cloudly → relay (verified): ${downloadMiBs.toFixed(1)} MiB/s (${percent(downloadMiBs, rawDown)} of raw), peak server RSS ${mb(downloadPeak)}`);
};

if (process.argv.includes('--server')) {
  await runServer();
} else {
  await runRelay();
}
