import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { runRelayConformance, type IRelayUnderTest } from '../scripts/relay-conformance.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { fetchServiceDatabaseClosure, receiveStagedArchiveObject, sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import type { ITypedContract } from '../ts/interfaces/requests/admin.js';

/**
 * The conformance kit against relays built on the project's own relay client: a complete one
 * passes every check; one that breaks the protocol is told which check failed and why.
 */

type TAnyCall = ITypedContract<string, any, any>;

async function* once(bytesArg: Buffer): AsyncIterable<Buffer> {
  yield bytesArg;
}

const drain = async (sourceArg: AsyncIterable<Buffer>): Promise<number> => {
  let length = 0;
  for await (const chunk of sourceArg) {
    length += chunk.byteLength;
  }
  return length;
};

/** A relay on the project's client that does what docs/relay-protocol.md asks. */
const startReferenceRelay = async (urlArg: string, tokenArg: string, optionsArg: { brokenBackupAnswer?: boolean } = {}): Promise<IRelayUnderTest> => {
  const relay = await CloudlyRelayClient.connect(urlArg, tokenArg);
  const closure = randomBytes(256 * 1024);
  const state = (requestArg: any, revisionArg: number, phaseArg: string, stagedArg: unknown[] = []) => ({
    state: { clusterId: requestArg.clusterId, targetNodeName: requestArg.targetNodeName, restoreId: requestArg.restoreId, revision: revisionArg, phase: phaseArg, stagedObjects: stagedArg },
  });
  const handlers: Record<string, (requestArg: any) => Promise<unknown>> = {
    backupClusterService: async (request) => {
      if (optionsArg.brokenBackupAnswer) {
        return {};
      }
      await sendServiceDatabaseClosure(relay, {
        backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId,
        descriptor: {
          format: 'corestore-database-closure-v1', byteLength: closure.length,
          sha256: createHash('sha256').update(closure).digest('hex'),
          receipt: { receiptId: 'export-1', receiptSha256: 'f'.repeat(64) },
        },
      }, once(closure));
      return { snapshots: [{ type: 'database', snapshotId: 'snap-1', resourceName: 'db', databaseName: 'app', createdAt: Date.now(), sizeBytes: closure.length }] };
    },
    restoreClusterService: async (request) => {
      const fetched = await fetchServiceDatabaseClosure(relay, { backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId });
      await drain(fetched.bytes);
      return { restored: request.snapshots };
    },
    pruneClusterNodeArchive: async () => ({ found: false }),
    getClusterCorestoreLegacyResources: async (request) => ({ reachable: false, nodeId: request.nodeId, readAt: Date.now(), errorCode: 'CORESTORE_ENDPOINT_UNKNOWN' }),
    coreflowPrepareIsolatedRestore: async (request) => state(request, 1, 'prepared'),
    stageIsolatedRestoreArchive: async (request) => {
      await drain(receiveStagedArchiveObject(relay, request.archive, request.object));
      return state(request, request.expectedRevision + 1, 'ready', [request.object]);
    },
    coreflowGetIsolatedRestoreStatus: async (request) => state(request, 2, 'ready'),
    coreflowExecuteIsolatedRestore: async (request) => state(request, request.expectedRevision + 1, 'executed'),
    coreflowCleanupIsolatedRestore: async (request) => state(request, request.expectedRevision + 1, 'cleaned-up'),
  };
  for (const [method, handler] of Object.entries(handlers)) {
    relay.addHandler<TAnyCall>(method, handler);
  }
  await relay.fire<TAnyCall>('registerClusterRelay', { registration: { origin: 'http://10.0.0.9:8080', version: '1.0.0', protocol: 'cluster-relay/1' } });
  await relay.fire<TAnyCall>('reportClusterNode', { report: { nodeId: 'node-1', name: 'node-1' } });
  return { stop: async () => relay.close() };
};

describe('the relay conformance kit', () => {
  test('the project\'s relay client, with handlers as the protocol document asks, passes every check', async () => {
    const lines: string[] = [];
    const checks = await runRelayConformance({
      startRelay: ({ url, token }) => startReferenceRelay(url, token),
      isolatedRestore: true,
      waitMs: 5_000,
      report: (lineArg) => lines.push(lineArg),
    });
    assert.deepEqual(checks.filter((entry) => !entry.ok), [], lines.join('\n'));
    assert.equal(checks.length, 9);
  });

  test('a relay that answers a backup without its closure is told which check failed and why', async () => {
    const checks = await runRelayConformance({
      startRelay: ({ url, token }) => startReferenceRelay(url, token, { brokenBackupAnswer: true }),
      waitMs: 5_000,
    });
    const failed = checks.filter((entry) => !entry.ok);
    assert.deepEqual(failed.map((entry) => entry.name), ['backs up a service (backupClusterService) and uploads its closure until the receipt']);
    assert.match(failed[0].detail, /relay-answer-invalid/);
    assert.match(failed[0].detail, /"path":"answer\.snapshots","message":"must be an array of snapshots"/);
  });

  test('a relay that never connects fails the first check and ends there', async () => {
    const checks = await runRelayConformance({ waitMs: 300 });
    assert.deepEqual(checks.map((entry) => [entry.name, entry.ok]), [['connects with its token and registers (registerClusterRelay)', false]]);
  });
});
