/**
 * Closure streaming benchmark: relay → Cloudly → durable blob store, and back, against two
 * baselines measured between the same processes in the same run: raw binary WebSocket frames,
 * and a bare WebSocket receiver that does the unavoidable work too (every byte hashed with
 * sha256 and written durably through the same blob store, fsync or completed S3 upload included;
 * back: read from that store with its proof, hashed again by the relay).
 *
 *   node --import tsx bench/closure.bench.ts [sizeMiB]        (default 256 MiB)
 *   CLOSURE_BENCH_MIB=1024 node --import tsx bench/closure.bench.ts     (1 GiB)
 *   CLOSURE_BENCH_STORE=filesystem|s3|both                    (default both; s3 = s3rver, started here)
 *   CLOSURE_BENCH_SERVER=tsx|compiled|both                     (default both)
 *   CLOSURE_BENCH_ROUNDS=3                                     rounds per server mode (default 3)
 *   CLOSURE_BENCH_UNTUNED=1            servers under plain node, without the node flags of bin/cloudly-server
 *   CLOSURE_BENCH_CHILD_FLAGS=--expose-gc                      server collects fully before each backup
 *   CLOSURE_BENCH_ALLOCATOR=default    compiled server without the production allocator env
 *   CLOSURE_BENCH_KEEP_CHUNKS=1        the relay leaves restored chunks to its collector
 *   MALLOC_ARENA_MAX=… MALLOC_MMAP_THRESHOLD_=… …              override it for the server child
 *
 * The server runs in a child process so its memory is its own; this process plays the relay.
 * The raw baseline's bare ws server runs in a third process, started the same way as the
 * Cloudly server (same runtime, flags and allocator environment).
 * Peak RSS is the kernel's high-water mark of the server process (`VmHWM` in
 * /proc/<pid>/status), reset through /proc/<pid>/clear_refs before each phase, so no
 * sampling gap can hide a peak.
 *
 * Two ways to start the server:
 * - `tsx`: `node --import tsx`, as `npm start` does. The TypeScript loader runs its own thread
 *   and keeps its transform cache, which costs the process tens of MB that Cloudly never uses.
 * - `compiled`: the same sources transpiled ahead of time as `npm run build` does (esbuild, which
 *   tsx itself uses), node_modules left as they are, run by plain `node` with the allocator
 *   environment production uses (`productionAllocatorEnv` in scripts/build.ts): `npm run start:prod`.
 *
 * Each round runs a backup, a restore and the raw baselines on the same two processes; odd
 * rounds run the closure phases first, even rounds the raw ones, so neither side always runs
 * on a warmer or fuller process. Raw frames are sent one at a time in two sizes, the closure's
 * own frame size and 256 KiB, and whichever size has the higher median is the baseline, so the
 * baseline is never understated. Backup is compared with raw relay → server frames, restore
 * with raw server → relay frames; the ratio printed is median against median, and each
 * round's own ratio is listed beside it. CPU seconds per GiB (user + system, all threads) are
 * printed beside the speeds: on a shared machine they move less than MiB/s.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { followOperation, outcomeOf } from '../ts/client/operations.js';
import { releaseOwnMemory } from '../ts/core/memoryrelease.js';
import { defaultStreamChunkBytes, streamFrameHeaderLength } from '../ts/core/streams.js';
import type { IReq_Cloudly_Relay_BackupClusterService } from '../ts/interfaces/requests/backup.js';
import { cpuSecondsOf, memoryOf, ownCpuSeconds } from './helpers/processstats.js';
import { benchSocketLimits, sized } from './helpers/smoke.js';

const mebibyte = 1024 * 1024;
/** Raw baseline frame sizes: the closure's own data frames, and 256 KiB. */
const rawFrameSizes = [streamFrameHeaderLength + defaultStreamChunkBytes, 256 * 1024];
const patternBytes = 4 * mebibyte;

interface IServerReady {
  kind: 'ready';
  baseUrl: string;
  relayToken: string;
  clusterId: string;
  nodeId: string;
  serviceId: string;
}

type TParentMessage =
  | { kind: 'stop' }
  | { kind: 'store-send'; key: string }
  | { kind: 'raw-send'; bytes: number; frameBytes: number }
  | { kind: 'order-backup'; backupId: string };
type TChildMessage =
  | IServerReady
  | { kind: 's3-ready'; endpoint: string }
  | { kind: 'raw-ready'; port: number }
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
    config: { port: 0, host: '127.0.0.1', mongoDbUrl: null, dataDir, adminUsername: 'admin', adminPassword: password, logLevel: 'warn', ...benchSocketLimits, ...(await benchBlobStoreConfig()) },
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

  const send = (messageArg: TChildMessage): void => {
    process.send!(messageArg);
  };
  process.on('message', async (messageArg: TParentMessage) => {
    if (messageArg.kind === 'order-backup') {
      // With CLOSURE_BENCH_CHILD_FLAGS=--expose-gc the server first collects fully, which puts
      // V8 into the state a long-running server is in (see the readme's benchmark section).
      (globalThis as { gc?: () => void }).gc?.();
      // An administrator orders the backup; Cloudly then calls the relay, which streams the closure.
      try {
        // The order answers its operation at once; the backup is done when the operation is.
        const { operation } = await admin.call('createServiceBackup', {
          clusterId: cluster.id, nodeId: 'bench-node', serviceId: service.id, backupId: messageArg.backupId,
        }) as { operation: { operationId: string } };
        outcomeOf(await followOperation(admin, operation.operationId, { timeoutMs: 60 * 60_000, pollMs: 20 }));
        send({ kind: 'backup-done' });
      } catch (error) {
        send({ kind: 'backup-done', error: String((error as { errorData?: unknown }).errorData ? JSON.stringify((error as { errorData?: unknown }).errorData) : error) });
      }
    } else if (messageArg.kind === 'stop') {
      await cloudly.stop();
      await fsp.rm(dataDir, { recursive: true, force: true });
      send({ kind: 'stopped' });
      process.exit(0);
    }
  });
  send({
    kind: 'ready', baseUrl: cloudly.baseUrl, relayToken, clusterId: cluster.id, nodeId: 'bench-node',
    serviceId: service.id,
  });
};

// ---------------------------------------------------------------- blob stores

type TBenchStore = 'filesystem' | 's3';
const s3BenchBucket = 'cloudly-bench';

/** The S3 settings of the store under test (s3rver started by the parent), or nothing for the filesystem. */
const benchBlobStoreConfig = async (): Promise<Record<string, unknown>> => {
  if (process.env.CLOSURE_BENCH_STORE_KIND !== 's3') {
    return {};
  }
  return {
    blobStore: 's3',
    s3: {
      bucket: s3BenchBucket, prefix: `cloudly-${randomBytes(4).toString('hex')}/`, region: 'us-east-1',
      endpoint: process.env.CLOSURE_BENCH_S3_ENDPOINT, forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    },
  };
};

/** The work baseline's filesystem store directory, removed when the bench stops. */
let baselineDir: string | null = null;

/** The work baseline's store: the same kind and settings Cloudly uses in this run. */
const openBaselineStore = async (): Promise<import('../ts/core/blobstore.js').IBlobStore> => {
  const { FilesystemBlobStore } = await import('../ts/core/blobstore.js');
  const { S3BlobStore, s3BlobStoreOptionsOf } = await import('../ts/core/s3blobstore.js');
  const settings = await benchBlobStoreConfig();
  const store = settings.s3
    ? new S3BlobStore(s3BlobStoreOptionsOf(settings.s3 as import('../ts/config.js').ICloudlyS3Config))
    : new FilesystemBlobStore(baselineDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-closure-baseline-')));
  await store.init();
  return store;
};

/**
 * Received frames as a blob source: frames queue until the store takes them, the socket is
 * paused while more than 8 MiB wait (as a stream's credit window would), and each frame is
 * freed once the store copied it out.
 */
class FrameFeed implements AsyncIterable<Uint8Array> {
  private readonly queue: Buffer[] = [];
  private queued = 0;
  private received = 0;
  private wake: (() => void) | null = null;

  constructor(private readonly socket: WebSocket, private readonly total: number) {}

  push(frameArg: Buffer): void {
    this.queue.push(frameArg);
    this.queued += frameArg.byteLength;
    this.received += frameArg.byteLength;
    if (this.queued > 8 * mebibyte) {
      this.socket.pause();
    }
    this.wake?.();
  }

  release(chunkArg: Uint8Array): void {
    releaseOwnMemory(chunkArg as Buffer);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    let delivered = 0;
    while (delivered < this.total) {
      const frame = this.queue.shift();
      if (!frame) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        this.wake = null;
        continue;
      }
      this.queued -= frame.byteLength;
      if (this.queued <= 8 * mebibyte) {
        this.socket.resume();
      }
      delivered += frame.byteLength;
      yield frame;
    }
  }
}

/** s3rver for the S3 runs, in a process of its own so its work is nobody's measured CPU. */
const runS3Server = async (): Promise<void> => {
  const { startTestS3Server } = await import('../test/helpers/s3server.js');
  const server = await startTestS3Server(s3BenchBucket);
  // Gone with the parent, whatever way it ended.
  process.once('disconnect', () => {
    void server.destroy().finally(() => process.exit(0));
  });
  process.on('message', async (messageArg: TParentMessage) => {
    if (messageArg.kind === 'stop') {
      await server.destroy();
      process.send!({ kind: 'stopped' } satisfies TChildMessage);
      process.exit(0);
    }
  });
  process.send!({ kind: 's3-ready', endpoint: server.endpoint } satisfies TChildMessage);
};

// ---------------------------------------------------------------- raw baseline child

/**
 * The raw baseline's server: a bare ws server in a process of its own (started like the
 * Cloudly child), so what it allocates never shows in Cloudly's resident set. It counts what
 * arrives and can send the same amount back.
 */
const runRawServer = async (): Promise<void> => {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, maxPayload: 64 * mebibyte });
  await new Promise<void>((resolve) => wss.once('listening', resolve));
  let rawSocket: WebSocket | null = null;
  const store = await openBaselineStore();
  wss.on('connection', (socket) => {
    rawSocket = socket;
    let received = 0;
    /** The blob store put fed by the binary frames while a store baseline runs. */
    let feeding: FrameFeed | null = null;
    socket.on('message', (data, isBinary) => {
      if (feeding && isBinary) {
        feeding.push(data as Buffer);
        return;
      }
      if (!isBinary) {
        received = 0;
        const text = (data as Buffer).toString();
        if (text.startsWith('{')) {
          // The work baseline: every frame goes into the blob store, which hashes it and writes it durably.
          const order = JSON.parse(text) as { put: string; byteLength: number; sha256: string };
          const feed = new FrameFeed(socket, order.byteLength);
          feeding = feed;
          void store.put(order.put, { byteLength: order.byteLength, sha256: order.sha256 }, feed).then(
            () => socket.send('stored'),
            (error: unknown) => socket.send(`failed: ${String((error as Error).message ?? error)}`),
          ).finally(() => {
            feeding = null;
          });
        }
        return;
      }
      received += (data as Buffer).byteLength;
      // Freed once counted where ws gave the frame a buffer of its own, as the closure's
      // receivers do, so the baseline pays no collector cost the closure is spared.
      releaseOwnMemory(data as Buffer);
      if (received >= Number(process.env.CLOSURE_BENCH_BYTES)) {
        socket.send('done');
      }
    });
  });
  process.on('message', async (messageArg: TParentMessage) => {
    if (messageArg.kind === 'store-send' && rawSocket) {
      // The work baseline back: the blob read with its proof, each chunk sent as one frame.
      const socket = rawSocket as WebSocket;
      for await (const chunk of store.read(messageArg.key, { transientChunks: true })) {
        await new Promise<void>((resolve, reject) => socket.send(chunk, { binary: true }, (error) => (error ? reject(error) : resolve())));
      }
    } else if (messageArg.kind === 'raw-send' && rawSocket) {
      const frame = randomBytes(messageArg.frameBytes);
      for (let sent = 0; sent < messageArg.bytes; sent += messageArg.frameBytes) {
        await new Promise<void>((resolve, reject) => rawSocket!.send(frame, { binary: true }, (error) => (error ? reject(error) : resolve())));
      }
    } else if (messageArg.kind === 'stop') {
      wss.close();
      if (baselineDir) {
        await fsp.rm(baselineDir, { recursive: true, force: true });
      }
      process.send!({ kind: 'stopped' } satisfies TChildMessage);
      process.exit(0);
    }
  });
  process.send!({ kind: 'raw-ready', port: (wss.address() as AddressInfo).port } satisfies TChildMessage);
};

// ---------------------------------------------------------------- relay parent

type TServerMode = 'tsx' | 'compiled';

/** Resets the process's peak RSS to its current RSS (Linux: `5` in clear_refs). */
const resetPeak = (pidArg: number): void => {
  fs.writeFileSync(`/proc/${pidArg}/clear_refs`, '5');
};

const nextMessage = <T extends TChildMessage['kind']>(childArg: ChildProcess, kindArg: T): Promise<Extract<TChildMessage, { kind: T }>> =>
  new Promise((resolve, reject) => {
    const listener = (messageArg: TChildMessage): void => {
      if (messageArg.kind === kindArg) {
        childArg.off('message', listener);
        childArg.off('exit', onExit);
        resolve(messageArg as Extract<TChildMessage, { kind: T }>);
      }
    };
    const onExit = (codeArg: number | null): void => reject(new Error(`server exited (${codeArg}) before ${kindArg}`));
    childArg.on('message', listener);
    childArg.once('exit', onExit);
  });

async function* patternStream(patternArg: Buffer, totalArg: number): AsyncIterable<Buffer> {
  for (let sent = 0; sent < totalArg; sent += patternArg.byteLength) {
    yield totalArg - sent >= patternArg.byteLength ? patternArg : patternArg.subarray(0, totalArg - sent);
  }
}

/**
 * Transpiles the sources as `npm run build` does (scripts/build.ts), plus this file, into a
 * folder under node_modules so the packages resolve as they do for the sources.
 */
const compileServer = async (): Promise<string> => {
  const { transpileSources, projectDir } = await import('../scripts/build.js');
  // In this checkout (git-ignored), not in node_modules, which checkouts may share: its packages
  // still resolve by walking up to the checkout's node_modules.
  const outdir = path.join(projectDir, '.nogit', 'closure-bench-build');
  // This file runs as the compiled server's parent too, so it and the helper it imports are built alongside.
  const benchFile = fileURLToPath(import.meta.url);
  await transpileSources({ outdir, outbase: projectDir, extraEntryPoints: [benchFile, path.join(path.dirname(benchFile), 'helpers', 'processstats.ts'), path.join(path.dirname(benchFile), 'helpers', 'smoke.ts')] });
  return path.join(outdir, 'bench', 'closure.bench.js');
};

/**
 * The allocator environment of the server child. `compiled` gets what production uses
 * (`productionAllocatorEnv`, as the Dockerfile sets it); `MALLOC_*` variables in the bench's own
 * environment override it; `CLOSURE_BENCH_ALLOCATOR=default` drops the production settings (only
 * the bench's own `MALLOC_*` remain: none = glibc's defaults).
 * `tsx` (the development start) gets only what the bench's own environment has.
 */
const allocatorEnvFor = async (modeArg: TServerMode): Promise<Record<string, string>> => {
  const own = Object.fromEntries(Object.entries(process.env).filter(([nameArg]) => nameArg.startsWith('MALLOC_'))) as Record<string, string>;
  if (modeArg === 'tsx' || process.env.CLOSURE_BENCH_ALLOCATOR === 'default') {
    return own;
  }
  const { productionAllocatorEnv } = await import('../scripts/build.js');
  return { ...productionAllocatorEnv, ...own };
};

/** One measured transfer: speed, CPU each process spent per GiB, the server's peak RSS. */
interface IPhase {
  mibPerSecond: number;
  serverCpuPerGiB: number;
  relayCpuPerGiB: number;
  peakRss: number;
  /** Resident set sampled every 20 ms while the phase ran: lowest and highest seen. */
  sampledRss: { min: number; max: number };
}

/** Starts measuring a phase; the returned function ends it after `bytesArg` moved. */
const startPhase = (pidArg: number): ((bytesArg: number) => IPhase) => {
  resetPeak(pidArg);
  const sampled = { min: Infinity, max: 0 };
  const sampler = setInterval(() => {
    const { rss } = memoryOf(pidArg);
    sampled.min = Math.min(sampled.min, rss);
    sampled.max = Math.max(sampled.max, rss);
  }, 20);
  const serverCpu = cpuSecondsOf(pidArg);
  const relayCpu = ownCpuSeconds();
  const started = process.hrtime.bigint();
  return (bytesArg) => {
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    clearInterval(sampler);
    const gib = bytesArg / (1024 * mebibyte);
    return {
      mibPerSecond: bytesArg / mebibyte / seconds,
      serverCpuPerGiB: (cpuSecondsOf(pidArg) - serverCpu) / gib,
      relayCpuPerGiB: (ownCpuSeconds() - relayCpu) / gib,
      peakRss: memoryOf(pidArg).peak,
      sampledRss: sampled,
    };
  };
};

/** One round: each phase once, raw phases once per frame size. */
interface IRound {
  backup: IPhase;
  restore: IPhase;
  rawUp: Map<number, IPhase>;
  rawDown: Map<number, IPhase>;
  /** The work baseline: bare ws + sha256 + the same durable store, each way. */
  workUp: IPhase;
  workDown: IPhase;
}

interface IRunFigures {
  mode: TServerMode;
  store: TBenchStore;
  allocatorEnv: Record<string, string>;
  idleRss: number;
  startPeak: number;
  rounds: IRound[];
}

const pause = (msArg: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, msArg));

const runOnce = async (modeArg: TServerMode, totalBytes: number, roundsArg: number, storeArg: TBenchStore, s3EndpointArg: string | null): Promise<IRunFigures> => {
  const benchFile = fileURLToPath(import.meta.url);
  const childFlags = (process.env.CLOSURE_BENCH_CHILD_FLAGS ?? '').split(' ').filter(Boolean);
  const allocatorEnv = await allocatorEnvFor(modeArg);
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([nameArg]) => !nameArg.startsWith('MALLOC_')));
  const env = {
    ...inherited, ...allocatorEnv, CLOSURE_BENCH_BYTES: String(totalBytes), MONGOMS_DISABLE_POSTINSTALL: '1',
    CLOSURE_BENCH_STORE_KIND: storeArg, ...(s3EndpointArg ? { CLOSURE_BENCH_S3_ENDPOINT: s3EndpointArg } : {}),
  };
  const compiled = modeArg === 'compiled' ? await compileServer() : null;
  const runTag = randomBytes(4).toString('hex');
  // Both children start through bin/cloudly-server, as `npm start` and `npm run start:prod` do: it
  // adds the server's node flags and execs node, so the child's pid is the measured process.
  // CLOSURE_BENCH_UNTUNED=1 runs them under plain node instead.
  const serverLauncher = path.join((await import('../scripts/build.js')).projectDir, 'bin', 'cloudly-server');
  const nodeArguments = compiled ? [...childFlags, compiled] : ['--import', 'tsx', ...childFlags, benchFile];
  const start = (roleArg: '--server' | '--raw-server'): ChildProcess => (process.env.CLOSURE_BENCH_UNTUNED
    ? spawn(process.execPath, [...nodeArguments, roleArg], { env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    : spawn(serverLauncher, ['--node', ...nodeArguments, roleArg], { env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }));
  const child = start('--server');
  const pid = child.pid!;
  const ready = await nextMessage(child, 'ready');
  const rawChild = start('--raw-server');
  const rawPid = rawChild.pid!;
  const rawReady = await nextMessage(rawChild, 'raw-ready');
  const command = (messageArg: TParentMessage): void => {
    child.send(messageArg);
  };
  // Settle after start-up, then take the resident set the server idles at.
  await pause(1500);
  const { rss: idleRss, peak: startPeak } = memoryOf(pid);

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
  const relay = await CloudlyRelayClient.connect(ready.baseUrl, ready.relayToken, { timeoutMs: 60 * 60_000, reconnect: false });
  /** Settled by the relay's handler once Cloudly's receipt is in (the admin's order may answer before: backups run as operations). */
  let backupMeasured: { resolve: (phaseArg: IPhase) => void; reject: (errorArg: Error) => void } | null = null;
  relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (requestArg) => {
    const endBackup = startPhase(pid);
    try {
      const sent = await sendServiceDatabaseClosure(relay, {
        backupId: requestArg.backupId, serviceId: requestArg.service.id, nodeId: requestArg.nodeId, descriptor,
      }, patternStream(pattern, totalBytes));
      const phase = endBackup(totalBytes);
      if (sent.receipt?.sha256 !== sha256 || sent.receipt.byteLength !== totalBytes) {
        throw new Error('receipt does not match the closure');
      }
      backupMeasured?.resolve(phase);
    } catch (error) {
      backupMeasured?.reject(error as Error);
      throw error;
    }
    return { snapshots: [] };
  });
  // The raw baseline: a bare ws client of the bench's plain ws server in the server process.
  const raw = new WebSocket(`ws://127.0.0.1:${rawReady.port}`, { maxPayload: 64 * mebibyte, perMessageDeflate: false });
  await new Promise<void>((resolve, reject) => {
    raw.once('open', resolve);
    raw.once('error', reject);
  });
  await pause(1500);

  /** An administrator orders the backup; Cloudly calls the relay, whose handler measures it. */
  const backupOnce = async (backupIdArg: string): Promise<IPhase> => {
    const measured = new Promise<IPhase>((resolve, reject) => {
      backupMeasured = { resolve, reject };
    });
    command({ kind: 'order-backup', backupId: backupIdArg });
    const ordered = await nextMessage(child, 'backup-done');
    if (ordered.error) {
      throw new Error(`backup failed: ${ordered.error}`);
    }
    const phase = await measured;
    backupMeasured = null;
    return phase;
  };
  const restoreOnce = async (backupIdArg: string): Promise<IPhase> => {
    const endRestore = startPhase(pid);
    // The relay only counts the bytes, so each chunk may be freed once it asks for the next.
    const fetched = await fetchServiceDatabaseClosure(relay, { backupId: backupIdArg, serviceId: ready.serviceId, nodeId: ready.nodeId }, {
      transientChunks: !process.env.CLOSURE_BENCH_KEEP_CHUNKS,
    });
    let downloaded = 0;
    for await (const chunk of fetched.bytes) {
      downloaded += chunk.byteLength;
    }
    const restore = endRestore(downloaded);
    if (downloaded !== totalBytes) {
      throw new Error(`restore delivered ${downloaded} of ${totalBytes} bytes`);
    }
    return restore;
  };
  const rawUpOnce = async (frameBytesArg: number): Promise<IPhase> => {
    const frame = randomBytes(frameBytesArg);
    const rawDone = new Promise<void>((resolve) => raw.once('message', () => resolve()));
    raw.send('reset');
    const endRaw = startPhase(rawPid);
    for (let sent = 0; sent < totalBytes; sent += frameBytesArg) {
      await new Promise<void>((resolve, reject) => raw.send(frame, { binary: true }, (error) => (error ? reject(error) : resolve())));
    }
    await rawDone;
    return endRaw(Math.ceil(totalBytes / frameBytesArg) * frameBytesArg);
  };
  const rawDownOnce = async (frameBytesArg: number): Promise<IPhase> => {
    let rawReceived = 0;
    let listener: (dataArg: Buffer, isBinaryArg: boolean) => void = () => undefined;
    const rawDownDone = new Promise<void>((resolve) => {
      listener = (dataArg, isBinaryArg) => {
        if (isBinaryArg) {
          rawReceived += dataArg.byteLength;
          releaseOwnMemory(dataArg);
          if (rawReceived >= totalBytes) {
            resolve();
          }
        }
      };
      raw.on('message', listener);
    });
    const endRaw = startPhase(rawPid);
    rawChild.send({ kind: 'raw-send', bytes: totalBytes, frameBytes: frameBytesArg } satisfies TParentMessage);
    await rawDownDone;
    raw.off('message', listener);
    return endRaw(rawReceived);
  };

  /** The work baseline up: closure-sized frames into the bare receiver's blob store, until it answers `stored`. */
  const frameBytes = defaultStreamChunkBytes;
  const workUpOnce = async (keyArg: string): Promise<IPhase> => {
    const stored = new Promise<string>((resolve) => raw.once('message', (dataArg: Buffer) => resolve(dataArg.toString())));
    raw.send(JSON.stringify({ put: keyArg, byteLength: totalBytes, sha256 }));
    const endWork = startPhase(rawPid);
    for await (const chunk of patternStream(pattern, totalBytes)) {
      for (let offset = 0; offset < chunk.byteLength; offset += frameBytes) {
        const frame = chunk.subarray(offset, offset + frameBytes);
        await new Promise<void>((resolve, reject) => raw.send(frame, { binary: true }, (error) => (error ? reject(error) : resolve())));
      }
    }
    const answer = await stored;
    if (answer !== 'stored') {
      throw new Error(`work baseline put failed: ${answer}`);
    }
    return endWork(totalBytes);
  };
  /** The work baseline down: the blob read with its proof and sent; the relay hashes every byte, as a restore does. */
  const workDownOnce = async (keyArg: string): Promise<IPhase> => {
    const hashDown = createHash('sha256');
    let received = 0;
    let listener: (dataArg: Buffer, isBinaryArg: boolean) => void = () => undefined;
    const done = new Promise<void>((resolve) => {
      listener = (dataArg, isBinaryArg) => {
        if (isBinaryArg) {
          hashDown.update(dataArg);
          received += dataArg.byteLength;
          releaseOwnMemory(dataArg);
          if (received >= totalBytes) {
            resolve();
          }
        }
      };
      raw.on('message', listener);
    });
    const endWork = startPhase(rawPid);
    rawChild.send({ kind: 'store-send', key: keyArg } satisfies TParentMessage);
    await done;
    raw.off('message', listener);
    const phase = endWork(received);
    if (received !== totalBytes || hashDown.digest('hex') !== sha256) {
      throw new Error('work baseline read returned other bytes');
    }
    return phase;
  };

  const rounds: IRound[] = [];
  for (let round = 1; round <= roundsArg; round++) {
    const backupId = `bench-backup-${round}`;
    const closurePhases = async (): Promise<Pick<IRound, 'backup' | 'restore'>> => {
      const backupPhase = await backupOnce(backupId);
      await pause(1000);
      const restorePhase = await restoreOnce(backupId);
      await pause(1000);
      return { backup: backupPhase, restore: restorePhase };
    };
    const rawPhases = async (): Promise<Pick<IRound, 'rawUp' | 'rawDown' | 'workUp' | 'workDown'>> => {
      const rawUp = new Map<number, IPhase>();
      const rawDown = new Map<number, IPhase>();
      for (const size of rawFrameSizes) {
        rawUp.set(size, await rawUpOnce(size));
        await pause(500);
        rawDown.set(size, await rawDownOnce(size));
        await pause(500);
      }
      const workKey = `baseline-${runTag}/${round}`;
      const workUp = await workUpOnce(workKey);
      await pause(1000);
      const workDown = await workDownOnce(workKey);
      await pause(1000);
      return { rawUp, rawDown, workUp, workDown };
    };
    if (round % 2 === 1) {
      const closure = await closurePhases();
      rounds.push({ ...closure, ...(await rawPhases()) });
    } else {
      const rawFigures = await rawPhases();
      rounds.push({ ...(await closurePhases()), ...rawFigures });
    }
  }
  raw.close();
  relay.close();
  rawChild.send({ kind: 'stop' } satisfies TParentMessage);
  await nextMessage(rawChild, 'stopped');
  command({ kind: 'stop' });
  await nextMessage(child, 'stopped');
  return { mode: modeArg, store: storeArg, allocatorEnv, idleRss, startPeak, rounds };
};

const mb = (bytesArg: number): string => `${(bytesArg / 1e6).toFixed(0)} MB`;

const median = (valuesArg: number[]): number => {
  const sorted = [...valuesArg].sort((aArg, bArg) => aArg - bArg);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

/** Median speed and CPU, the range of speeds, and the highest peak RSS over the rounds. */
const summarize = (phasesArg: IPhase[]): { mibPerSecond: number; text: string } => {
  const speeds = phasesArg.map((phaseArg) => phaseArg.mibPerSecond);
  const mibPerSecond = median(speeds);
  return {
    mibPerSecond,
    text: `${mibPerSecond.toFixed(0)} MiB/s (${Math.min(...speeds).toFixed(0)}–${Math.max(...speeds).toFixed(0)}); `
      + `CPU s/GiB server ${median(phasesArg.map((phaseArg) => phaseArg.serverCpuPerGiB)).toFixed(2)}, `
      + `relay ${median(phasesArg.map((phaseArg) => phaseArg.relayCpuPerGiB)).toFixed(2)}; `
      + `peak server RSS ${mb(Math.max(...phasesArg.map((phaseArg) => phaseArg.peakRss)))} `
      + `(per round: ${phasesArg.map((phaseArg) => mb(phaseArg.peakRss)).join(', ')})`,
  };
};

const runRelay = async (): Promise<void> => {
  const sizeMiB = Number(process.argv[2] ?? process.env.CLOSURE_BENCH_MIB ?? sized(256, 4));
  if (!Number.isSafeInteger(sizeMiB) || sizeMiB < 1) {
    throw new Error('size must be a whole number of MiB');
  }
  const rounds = Number(process.env.CLOSURE_BENCH_ROUNDS ?? sized(3, 1));
  if (!Number.isSafeInteger(rounds) || rounds < 1) {
    throw new Error('CLOSURE_BENCH_ROUNDS must be a whole number ≥ 1');
  }
  const modeSetting = process.env.CLOSURE_BENCH_SERVER ?? 'both';
  const modes: TServerMode[] = modeSetting === 'both' ? ['compiled', 'tsx'] : [modeSetting as TServerMode];
  if (!modes.every((modeArg) => modeArg === 'tsx' || modeArg === 'compiled')) {
    throw new Error('CLOSURE_BENCH_SERVER must be tsx, compiled or both');
  }
  const storeSetting = process.env.CLOSURE_BENCH_STORE ?? 'both';
  const stores: TBenchStore[] = storeSetting === 'both' ? ['filesystem', 's3'] : [storeSetting as TBenchStore];
  if (!stores.every((storeArg) => storeArg === 'filesystem' || storeArg === 's3')) {
    throw new Error('CLOSURE_BENCH_STORE must be filesystem, s3 or both');
  }
  const percent = (valueArg: number, baseArg: number): string => `${((valueArg / baseArg) * 100).toFixed(0)}%`;
  const kib = (bytesArg: number): string => `${(bytesArg / 1024).toFixed(bytesArg % 1024 === 0 ? 0 : 1)} KiB`;
  console.log(`closure size: ${sizeMiB} MiB, ${rounds} rounds, stream chunks of ${kib(defaultStreamChunkBytes)}, `
    + `raw frames of ${rawFrameSizes.map(kib).join(' and ')}, ${os.cpus().length} cores, node ${process.version}, load ${os.loadavg()[0].toFixed(2)}`);
  console.log('figures: median MiB/s (lowest–highest) over the rounds, median CPU seconds per GiB, highest peak server RSS;');
  console.log('for raw frames "server" is the bare ws server, a process of its own started the same way as Cloudly;');
  console.log('the work baseline is that bare ws server doing the unavoidable work too: sha256 over every byte and the same');
  console.log('durable blob store (fsynced file, or completed S3 upload), and back a read with its proof that the relay hashes again');
  // s3rver in a process of its own, under tsx whatever the server mode (it is not what is measured).
  let s3Child: ChildProcess | null = null;
  let s3Endpoint: string | null = null;
  if (stores.includes('s3')) {
    s3Child = fork(fileURLToPath(import.meta.url).replace(/\.js$/, '.ts'), ['--s3-server'], {
      execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    s3Endpoint = (await nextMessage(s3Child, 's3-ready')).endpoint;
    console.log(`S3 store: s3rver ${s3Endpoint} on the same 2 cores (a filesystem-backed test server, not a production S3)`);
  }
  for (const mode of modes) {
    for (const store of stores) {
      const figures = await runOnce(mode, sizeMiB * mebibyte, rounds, store, s3Endpoint);
      console.log(`server started ${mode === 'tsx' ? 'under tsx (node --import tsx)' : 'as transpiled JS (plain node)'}, blob store ${store}: `
        + `idle RSS ${mb(figures.idleRss)} (start-up peak ${mb(figures.startPeak)})`);
      const allocatorText = Object.entries(figures.allocatorEnv).map(([nameArg, valueArg]) => `${nameArg}=${valueArg}`).join(' ');
      console.log(`  server allocator environment: ${allocatorText || '(glibc defaults, no MALLOC_* set)'}`);
      /** The raw direction's figures per frame size, and the size with the higher median. */
      const baselineOf = (pickArg: (roundArg: IRound) => Map<number, IPhase>, labelArg: string): IPhase[] => {
        let best: { phases: IPhase[]; mibPerSecond: number } | null = null;
        for (const size of rawFrameSizes) {
          const phases = figures.rounds.map((roundArg) => pickArg(roundArg).get(size)!);
          const summary = summarize(phases);
          console.log(`  raw ws frames ${labelArg}, ${kib(size)} frames: ${summary.text}`);
          if (!best || summary.mibPerSecond > best.mibPerSecond) {
            best = { phases, mibPerSecond: summary.mibPerSecond };
          }
        }
        return best!.phases;
      };
      const rawUp = baselineOf((roundArg) => roundArg.rawUp, 'relay → server');
      const rawDown = baselineOf((roundArg) => roundArg.rawDown, 'server → relay');
      const compare = (labelArg: string, phasesArg: IPhase[], baselineArg: IPhase[]): void => {
        const perRound = phasesArg.map((phaseArg, indexArg) => percent(phaseArg.mibPerSecond, baselineArg[indexArg].mibPerSecond)).join(', ');
        const summary = summarize(phasesArg);
        const baselineMedian = median(baselineArg.map((phaseArg) => phaseArg.mibPerSecond));
        console.log(`  ${labelArg}: ${summary.text}; ${percent(summary.mibPerSecond, baselineMedian)} of the raw median (per round: ${perRound})`);
      };
      compare('closure backup relay → Cloudly → durable blob', figures.rounds.map((roundArg) => roundArg.backup), rawUp);
      compare('closure restore blob → Cloudly → relay, sha256 checked at both ends', figures.rounds.map((roundArg) => roundArg.restore), rawDown);
      const workUp = figures.rounds.map((roundArg) => roundArg.workUp);
      const workDown = figures.rounds.map((roundArg) => roundArg.workDown);
      console.log(`  work baseline relay → bare ws → sha256 + durable ${store} write: ${summarize(workUp).text}`);
      console.log(`  work baseline ${store} read with proof → bare ws → relay sha256: ${summarize(workDown).text}`);
      const against = (labelArg: string, phasesArg: IPhase[], baselineArg: IPhase[]): void => {
        const ratio = median(phasesArg.map((phaseArg) => phaseArg.mibPerSecond)) / median(baselineArg.map((phaseArg) => phaseArg.mibPerSecond));
        const perRound = phasesArg.map((phaseArg, indexArg) => `${(phaseArg.mibPerSecond / baselineArg[indexArg].mibPerSecond).toFixed(2)}×`).join(', ');
        console.log(`  ${labelArg}: ${ratio.toFixed(2)}× the work baseline (per round: ${perRound}; aim ≥ 0.6×)`);
      };
      against(`closure backup (${store})`, figures.rounds.map((roundArg) => roundArg.backup), workUp);
      against(`closure restore (${store})`, figures.rounds.map((roundArg) => roundArg.restore), workDown);
    }
  }
  if (s3Child) {
    s3Child.send({ kind: 'stop' } satisfies TParentMessage);
    await nextMessage(s3Child, 'stopped');
  }
};

if (process.argv.includes('--server')) {
  await runServer();
} else if (process.argv.includes('--raw-server')) {
  await runRawServer();
} else if (process.argv.includes('--s3-server')) {
  await runS3Server();
} else {
  await runRelay();
}
