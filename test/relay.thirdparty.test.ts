import { after, before, describe, test } from 'node:test';
import { followOperation, outcomeOf } from '../ts/client/operations.js';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { WebSocket, type RawData } from 'ws';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { runRelayConformance } from '../scripts/relay-conformance.js';
import { scratchRehearsalMappings } from './backup.fixture.js';

/**
 * A relay as another team would write it from docs/relay-protocol.md alone: plain `ws`, JSON and
 * byte buffers, nothing imported from ts/ (the test helpers only start Cloudly and act as the
 * administrator). It registers, reports a node, answers every Cloudly → relay call, backs up and
 * restores a database closure, and stages an isolated-restore archive object.
 */

type TJson = Record<string, unknown>;
/** Any administrator call: the helper's admin client is typed by contract, this relay knows none. */
type TAnyCall = { method: string; request: any; response: any };

class RelayRefusal extends Error {
  constructor(public readonly data: TJson) {
    super(`refused: ${JSON.stringify(data)}`);
  }
}

// Section 8.2 of the protocol document.
const frameVersion = 1;
const kinds = { data: 1, end: 2, abort: 3, credit: 4, complete: 5 } as const;
const headerLength = 18;

const frame = (kindArg: number, streamIdArg: string, payloadArg: Buffer = Buffer.alloc(0)): Buffer =>
  Buffer.concat([Buffer.from([frameVersion, kindArg]), Buffer.from(streamIdArg, 'hex'), payloadArg]);
const creditFrame = (streamIdArg: string, bytesArg: number): Buffer => {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(bytesArg, 0);
  return frame(kinds.credit, streamIdArg, payload);
};

interface IUpload { credit: number; wake: () => void; done: (receiptArg: TJson) => void; fail: (reasonArg: string) => void }
interface IDownload { chunks: Buffer[]; consumed: number; done: (bytesArg: Buffer) => void; fail: (reasonArg: string) => void }

class ThirdPartyRelay {
  private readonly pending = new Map<string, { resolve: (valueArg: TJson) => void; reject: (errorArg: Error) => void; onAnswer?: (answerArg: TJson) => void }>();
  private readonly uploads = new Map<string, IUpload>();
  private readonly downloads = new Map<string, IDownload>();
  private nextId = 0;
  /** Credit frames that named a stream this relay had not set up yet (it sets up on `accepted`). */
  public creditBeforeSetup = 0;
  public readonly handlers = new Map<string, (requestArg: any) => Promise<TJson>>();
  public readonly seen: Array<{ method: string; request: any }> = [];
  public closed = false;

  private constructor(public readonly ws: WebSocket) {
    ws.on('message', (dataArg: RawData, isBinaryArg: boolean) => {
      const bytes = Buffer.isBuffer(dataArg) ? dataArg : Buffer.concat(dataArg as Buffer[]);
      if (isBinaryArg) {
        this.onFrame(bytes);
      } else {
        void this.onEnvelope(JSON.parse(bytes.toString('utf8')) as TJson);
      }
    });
    ws.on('close', () => { this.closed = true; });
  }

  static async connect(baseUrlArg: string, tokenArg: string): Promise<ThirdPartyRelay> {
    const ws = new WebSocket(`${baseUrlArg.replace(/^http/, 'ws')}/typedsocket`, { headers: { authorization: `Bearer ${tokenArg}` } });
    await new Promise<void>((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
    return new ThirdPartyRelay(ws);
  }

  /** `onAnswerArg` runs as the answer frame is read, before the next frame is. */
  call(methodArg: string, requestArg: TJson, onAnswerArg?: (answerArg: TJson) => void): Promise<TJson> {
    const id = `relay-${++this.nextId}`;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onAnswer: onAnswerArg });
      this.ws.send(JSON.stringify({ method: methodArg, request: requestArg, response: null, correlation: { id, phase: 'request' } }));
    });
  }

  private async onEnvelope(envelopeArg: TJson): Promise<void> {
    const correlation = envelopeArg.correlation as { id: string; phase: string };
    if (correlation.phase === 'response') {
      const waiting = this.pending.get(correlation.id);
      this.pending.delete(correlation.id);
      const error = envelopeArg.error as { data: TJson } | undefined;
      if (error) {
        waiting?.reject(new RelayRefusal(error.data));
      } else {
        waiting?.onAnswer?.(envelopeArg.response as TJson);
        waiting?.resolve(envelopeArg.response as TJson);
      }
      return;
    }
    const method = envelopeArg.method as string;
    this.seen.push({ method, request: envelopeArg.request });
    const answer: TJson = { method, response: null, correlation: { id: correlation.id, phase: 'response' } };
    const handler = this.handlers.get(method);
    try {
      if (!handler) {
        throw new RelayRefusal({ code: 'invalid-request', retryable: false, reasons: ['method-not-served'], causes: [{ path: 'method', message: `method ${method} is not served` }] });
      }
      answer.response = await handler(envelopeArg.request);
    } catch (error) {
      answer.error = { text: 'The relay refused.', data: error instanceof RelayRefusal ? error.data : { code: 'internal', retryable: true } };
    }
    this.ws.send(JSON.stringify(answer));
  }

  private onFrame(bytesArg: Buffer): void {
    if (bytesArg.length < headerLength || bytesArg[0] !== frameVersion) {
      return;
    }
    const streamId = bytesArg.subarray(2, headerLength).toString('hex');
    const payload = bytesArg.subarray(headerLength);
    const upload = this.uploads.get(streamId);
    const download = this.downloads.get(streamId);
    switch (bytesArg[1]) {
      case kinds.credit:
        if (!upload) {
          this.creditBeforeSetup++;
          return;
        }
        upload.credit += payload.readUInt32BE(0);
        upload.wake();
        return;
      case kinds.complete:
        this.uploads.delete(streamId);
        upload?.done(JSON.parse(payload.toString('utf8')) as TJson);
        return;
      case kinds.abort:
        this.uploads.delete(streamId);
        this.downloads.delete(streamId);
        (upload ?? download)?.fail(payload.toString('utf8'));
        return;
      case kinds.data:
        if (!download) {
          this.ws.send(frame(kinds.abort, streamId, Buffer.from('stream-unknown')));
          return;
        }
        download.chunks.push(Buffer.from(payload));
        download.consumed += payload.length;
        if (download.consumed >= 512 * 1024) {
          this.ws.send(creditFrame(streamId, download.consumed));
          download.consumed = 0;
        }
        return;
      case kinds.end:
        this.downloads.delete(streamId);
        download?.done(Buffer.concat(download.chunks));
        return;
    }
  }

  /** Section 8.3: announce, set the stream up on `accepted`, send within credit, wait for the receipt. */
  async sendClosure(requestArg: { backupId: string; serviceId: string; nodeId: string }, bytesArg: Buffer): Promise<TJson> {
    const streamId = randomBytes(16).toString('hex');
    const descriptor = {
      format: 'corestore-database-closure-v1',
      byteLength: bytesArg.length,
      sha256: createHash('sha256').update(bytesArg).digest('hex'),
      receipt: { receiptId: `export-${streamId.slice(0, 8)}`, receiptSha256: createHash('sha256').update('corestore receipt').digest('hex') },
    };
    let wakeUp = (): void => undefined;
    let settle!: { resolve: (receiptArg: TJson) => void; reject: (errorArg: Error) => void };
    const receipt = new Promise<TJson>((resolve, reject) => { settle = { resolve, reject }; });
    // This relay sets its stream up only when it reads `accepted` (section 8.3 step 3: the first
    // credit follows the answer on the wire, so it is never missed).
    const answer = await this.call('backupServiceDatabaseClosure', {
      ...requestArg, descriptor, closure: { kind: 'cloudly-byte-stream', streamId, direction: 'send' },
    }, (acceptedArg) => {
      if (acceptedArg.accepted === true) {
        this.uploads.set(streamId, {
          credit: 0,
          wake: () => wakeUp(),
          done: settle.resolve,
          fail: (reasonArg) => settle.reject(new Error(`upload aborted: ${reasonArg}`)),
        });
      }
    });
    assert.deepEqual(answer, { accepted: true });
    const upload = this.uploads.get(streamId)!;
    let offset = 0;
    while (offset < bytesArg.length) {
      if (upload.credit === 0) {
        await new Promise<void>((resolve) => { wakeUp = resolve; });
        continue;
      }
      const length = Math.min(upload.credit, 100 * 1024, bytesArg.length - offset);
      this.ws.send(frame(kinds.data, streamId, bytesArg.subarray(offset, offset + length)));
      upload.credit -= length;
      offset += length;
    }
    this.ws.send(frame(kinds.end, streamId));
    return receipt;
  }

  /** Section 8.4 / 8.5: grant credit, collect until `end`, prove length and sha256; no `complete`. */
  async receiveStream(streamIdArg: string, expectedArg: { byteLength: number; sha256: string }): Promise<Buffer> {
    const bytes = new Promise<Buffer>((resolve, reject) => {
      this.downloads.set(streamIdArg, { chunks: [], consumed: 0, done: resolve, fail: (reasonArg) => reject(new Error(`download aborted: ${reasonArg}`)) });
    });
    this.ws.send(creditFrame(streamIdArg, 1024 * 1024));
    const received = await bytes;
    assert.equal(received.length, expectedArg.byteLength);
    assert.equal(createHash('sha256').update(received).digest('hex'), expectedArg.sha256);
    return received;
  }
}

/** The relay's answers to every Cloudly → relay method (section 7), bytes going to `sinksArg`. */
const serveCloudlyCalls = (
  relay: ThirdPartyRelay,
  sinksArg: { closureOf: (backupIdArg: string) => Buffer; restored: Buffer[]; staged: Buffer[] },
): void => {
  const state = (requestArg: any, revisionArg: number, phaseArg: string, stagedArg: unknown[] = []) => ({
    state: { clusterId: requestArg.clusterId, targetNodeName: requestArg.targetNodeName, restoreId: requestArg.restoreId, revision: revisionArg, phase: phaseArg, stagedObjects: stagedArg },
  });
  const handlers: Record<string, (requestArg: any) => Promise<TJson>> = {
    backupClusterService: async (request) => {
      const bytes = sinksArg.closureOf(request.backupId);
      await relay.sendClosure({ backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId }, bytes);
      return { snapshots: [{ type: 'database', snapshotId: 'snap-1', resourceName: 'db', databaseName: 'app', createdAt: Date.now(), sizeBytes: bytes.length }] };
    },
    restoreClusterService: async (request) => {
      const answer = await relay.call('restoreServiceDatabaseClosure', { backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId });
      const reference = answer.closure as { streamId: string; direction: string };
      assert.equal(reference.direction, 'receive');
      sinksArg.restored.push(await relay.receiveStream(reference.streamId, answer.descriptor as { byteLength: number; sha256: string }));
      return { restored: request.snapshots };
    },
    pruneClusterNodeArchive: async (request) => ({ found: true, result: { dryRun: request.dryRun ?? false, keptSnapshotIds: ['snap-1'], removedSnapshotIds: [], reclaimedBytes: 0 } }),
    getClusterCorestoreLegacyResources: async (request) => ({ reachable: false, nodeId: request.nodeId, readAt: Date.now(), errorCode: 'CORESTORE_UNREACHABLE' }),
    applyRuntimeLocalStorageClaim: async (request) => ({ status: 'accepted', state: 'pending', claim: request.claim }),
    pushClusterIngressRouteTableChanged: async () => ({}),
    coreflowPrepareIsolatedRestore: async (request) => state(request, 1, 'prepared'),
    stageIsolatedRestoreArchive: async (request) => {
      assert.equal(request.archive.direction, 'send');
      sinksArg.staged.push(await relay.receiveStream(request.archive.streamId, { byteLength: request.object.size, sha256: request.object.sha256 }));
      return state(request, request.expectedRevision + 1, 'ready', [request.object]);
    },
    coreflowGetIsolatedRestoreStatus: async (request) => state(request, 2, 'ready'),
    coreflowExecuteIsolatedRestore: async (request) => state(request, request.expectedRevision + 1, 'executed'),
    coreflowCleanupIsolatedRestore: async (request) => state(request, request.expectedRevision + 1, 'cleaned-up'),
  };
  for (const [method, handler] of Object.entries(handlers)) {
    relay.handlers.set(method, handler);
  }
};

describe('a third-party relay written from docs/relay-protocol.md', () => {
  let t: ITestCloudly;
  let relay: ThirdPartyRelay;
  let clusterId: string;
  const nodeId = 'node-a';
  let serviceId: string;
  // Larger than Cloudly's first 8 MiB window, so the upload needs credit granted again.
  const closure = randomBytes(9 * 1024 * 1024 + 12345);
  const smallClosure = randomBytes(4096);
  const closureOf = (backupIdArg: string): Buffer => (backupIdArg === 'tp-backup-1' ? closure : smallClosure);
  const restoredClosures: Buffer[] = [];
  const stagedObjects: Buffer[] = [];
  /** Backups and restores answer an operation at once: this follows it and answers its outcome, as the call once did. */
  const admin = async (methodArg: string, requestArg: TJson): Promise<any> => {
    const answer = await t.admin.call<TAnyCall>(methodArg, requestArg) as any;
    return methodArg === 'createServiceBackup' || methodArg === 'restoreServiceBackup' || methodArg === 'createIsolatedRestore'
      ? outcomeOf(await followOperation(t.admin, answer.operation.operationId, { timeoutMs: 60_000 }))
      : answer;
  };

  before(async () => {
    t = await startTestCloudly({ socketPingIntervalMs: 100 });
    const created = await t.createCluster('third-party');
    clusterId = created.cluster.id;
    relay = await ThirdPartyRelay.connect(t.baseUrl, created.relayToken);
    serveCloudlyCalls(relay, { closureOf, restored: restoredClosures, staged: stagedObjects });
    ({ service: { id: serviceId } } = await admin('createService', {
      service: {
        name: 'third-party-db', organizationId: 'org-1', clusterId,
        runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
        volumes: [],
      },
    }));
  });
  after(async () => {
    relay.ws.terminate();
    await t.stop();
  });

  test('registers and reports a node, as the examples of section 2 show', async () => {
    const { registration } = await relay.call('registerClusterRelay', { registration: { origin: 'http://10.0.0.5:8080', version: '1.0.0', protocol: 'cluster-relay/1' } });
    assert.equal((registration as TJson).connected, true);
    assert.equal((registration as TJson).clusterId, clusterId);
    await assert.rejects(relay.call('reportClusterNode', { report: { nodeId } }), (error: RelayRefusal) =>
      error.data.code === 'invalid-request' && (error.data.reasons as string[]).length === 1);
    const { node } = await relay.call('reportClusterNode', { report: { nodeId, name: nodeId, hostAddresses: ['10.0.0.5'] } });
    assert.equal((node as TJson).source, 'relay-report');
    const { nodes } = await relay.call('getClusterNodeCorestores', {});
    assert.deepEqual(nodes, [{ nodeId, corestore: null }]);
  });

  test('backs up a closure (credit only after accepted) and restores it without sending complete', async () => {
    const { backup } = await admin('createServiceBackup', { clusterId, nodeId, serviceId, backupId: 'tp-backup-1' });
    assert.equal(backup.closure.descriptor.byteLength, closure.length);
    assert.equal(relay.creditBeforeSetup, 0, 'no credit arrived before the accepted answer');
    const restored = await admin('restoreServiceBackup', { backupId: 'tp-backup-1' });
    assert.equal(restored.restored.length, 1);
    assert.ok(restoredClosures.at(-1)!.equals(closure));
  });

  test('restores end at end: seventy in a row never hit the limit of 64 open streams, though no complete is sent', async () => {
    await admin('createServiceBackup', { clusterId, nodeId, serviceId, backupId: 'tp-small' });
    for (let index = 0; index < 70; index++) {
      await admin('restoreServiceBackup', { backupId: 'tp-small' });
      assert.ok(restoredClosures.at(-1)!.equals(smallClosure));
    }
  });

  test('twenty uploads in a row: never a credit before the accepted answer', async () => {
    for (let index = 0; index < 20; index++) {
      await admin('createServiceBackup', { clusterId, nodeId, serviceId, backupId: `tp-order-${index}` });
    }
    assert.equal(relay.creditBeforeSetup, 0);
  });

  test('answers the archive, inventory and isolated-restore calls with the documented shapes', async () => {
    const pruned = await admin('adminPruneClusterNodeArchive', { clusterId, nodeId, retention: { keepLast: 1 } });
    assert.equal(pruned.found, true);
    const inventory = await admin('getCorestoreLegacyResources', { clusterId, nodeId });
    assert.equal(inventory.inventory.reachable, false);
    const mappings = scratchRehearsalMappings();
    const created = await admin('createIsolatedRestore', { backupId: 'tp-backup-1', targetNodeName: nodeId, restoreId: 'tp-restore-1', mappings });
    assert.equal(created.state.phase, 'ready');
    assert.ok(stagedObjects.at(-1)!.equals(closure));
    const status = await admin('stepIsolatedRestore', { restoreId: 'tp-restore-1', operation: 'status' });
    const executed = await admin('stepIsolatedRestore', { restoreId: 'tp-restore-1', operation: 'execute', expectedRevision: status.state.revision });
    const cleaned = await admin('stepIsolatedRestore', { restoreId: 'tp-restore-1', operation: 'cleanup', expectedRevision: executed.state.revision });
    assert.equal(cleaned.state.phase, 'cleaned-up');
  });

  test('answers the claim push and the route-table hint, and every Cloudly → relay method reached it', async () => {
    const claim = await t.cloudly.relays.call<TJson>(clusterId, 'applyRuntimeLocalStorageClaim', { session: { id: 's' }, claim: { id: 'c', generation: 1 } });
    assert.equal(claim.status, 'accepted');
    assert.deepEqual(await t.cloudly.relays.call(clusterId, 'pushClusterIngressRouteTableChanged', { revision: 1 }), {});
    const reached = new Set(relay.seen.map((entry) => entry.method));
    for (const method of Object.keys(Object.fromEntries(relay.handlers))) {
      assert.ok(reached.has(method), `${method} was called`);
    }
  });

  test('a 200 KiB abort reason becomes a bounded log line, and pings are answered while idle', async () => {
    const streamId = randomBytes(16).toString('hex');
    const descriptor = { format: 'corestore-database-closure-v1', byteLength: 10, sha256: 'd'.repeat(64), receipt: { receiptId: 'r', receiptSha256: 'e'.repeat(64) } };
    relay.handlers.set('backupClusterService', async () => ({ snapshots: [] }));
    await admin('createServiceBackup', { clusterId, nodeId, serviceId, backupId: 'tp-abort-2' });
    await relay.call('backupServiceDatabaseClosure', {
      backupId: 'tp-abort-2', serviceId, nodeId, descriptor, closure: { kind: 'cloudly-byte-stream', streamId, direction: 'send' },
    });
    const logged = t.logs.length;
    relay.ws.send(frame(kinds.abort, streamId, Buffer.alloc(200 * 1024, 'x')));
    await waitFor(() => t.logs.slice(logged).some((line) => line.includes('closure refused')), 'the abort logged');
    const line = t.logs.slice(logged).find((entry) => entry.includes('closure refused'))!;
    assert.ok(line.length < 4096, `log line of ${line.length} characters`);
    // Idle for several ping intervals: the socket lives because ws answers pings by itself.
    let pings = 0;
    relay.ws.on('ping', () => { pings++; });
    await waitFor(() => pings >= 3, 'three pings');
    assert.equal(relay.closed, false);
    // And a relay that stops reading is cut off.
    (relay.ws as unknown as { _socket: Socket })._socket.pause();
    await waitFor(() => t.cloudly.relays.sessionsOf(clusterId).length === 0, 'the frozen relay terminated', 5000);
  });
});

describe('the conformance kit against this relay', () => {
  test('passes every check, isolated restore included', async () => {
    const lines: string[] = [];
    const checks = await runRelayConformance({
      isolatedRestore: true,
      waitMs: 5_000,
      report: (lineArg) => lines.push(lineArg),
      startRelay: async ({ url, token }) => {
        const relay = await ThirdPartyRelay.connect(url, token);
        serveCloudlyCalls(relay, { closureOf: () => randomBytes(100_000), restored: [], staged: [] });
        await relay.call('registerClusterRelay', { registration: { origin: 'http://10.0.0.7:8080', version: '0.1.0', protocol: 'cluster-relay/1' } });
        await relay.call('reportClusterNode', { report: { nodeId: 'kit-node', name: 'kit-node' } });
        return { stop: async () => { relay.ws.close(); } };
      },
    });
    assert.deepEqual(checks.filter((entry) => !entry.ok), [], lines.join('\n'));
    assert.equal(checks.length, 9);
  });
});
