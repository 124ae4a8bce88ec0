import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../ts/interfaces/private/canonicaljson.js';
import { startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IService } from '../ts/interfaces/data/service.js';
import type { ICorestoreDatabaseClosureDescriptor } from '../ts/interfaces/data/corestoreclosure.js';

/** A real Cloudly with one cluster, one node, one service and the cluster's relay connected. */
export interface IBackupWorld {
  t: ITestCloudly;
  clusterId: string;
  relayToken: string;
  nodeId: string;
  service: IService;
  relay: CloudlyRelayClient;
}

export const sha256Of = sha256Hex;

export const descriptorOf = (bytesArg: Uint8Array, overridesArg: Partial<ICorestoreDatabaseClosureDescriptor> = {}): ICorestoreDatabaseClosureDescriptor => ({
  format: 'corestore-database-closure-v1',
  byteLength: bytesArg.byteLength,
  sha256: sha256Of(bytesArg),
  receipt: { receiptId: `export-${randomBytes(4).toString('hex')}`, receiptSha256: sha256Of(Buffer.from('receipt')) },
  ...overridesArg,
});

export async function* chunked(bytesArg: Buffer, sizeArg = 256 * 1024): AsyncIterable<Buffer> {
  for (let offset = 0; offset < bytesArg.byteLength; offset += sizeArg) {
    yield bytesArg.subarray(offset, offset + sizeArg);
  }
}

export const collect = async (sourceArg: AsyncIterable<Buffer>): Promise<Buffer> => {
  const chunks: Buffer[] = [];
  for await (const chunk of sourceArg) {
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
};

export const addClusterWorld = async (tArg: ITestCloudly, nameArg: string): Promise<Omit<IBackupWorld, 't'>> => {
  const { cluster, relayToken } = await tArg.createCluster(nameArg);
  const nodeId = `${nameArg}-node-a`;
  await tArg.caller.call('addClusterNode', { clusterId: cluster.id, name: nodeId, nodeId });
  const { service } = await tArg.caller.call('createService', {
    service: {
      name: `${nameArg}-db`,
      organizationId: 'org-1',
      clusterId: cluster.id,
      runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
      volumes: [],
    },
  });
  const relay = await tArg.connectRelay(relayToken);
  return { clusterId: cluster.id, relayToken, nodeId, service, relay };
};

export const startBackupWorld = async (): Promise<IBackupWorld> => {
  const t = await startTestCloudly();
  return { t, ...(await addClusterWorld(t, 'alpha')) };
};

/**
 * One isolated-restore mapping: the backup's database snapshot (resource db, database app) into a
 * scratch rehearsal database, with a well-formed allocation.
 */
export const scratchRehearsalMappings = () => [{
  type: 'database',
  source: { resourceName: 'db', databaseName: 'app' },
  target: {
    resourceName: 'scratch', databaseName: 'app_rehearsal',
    databaseAllocation: { purpose: 'scratch-rehearsal', rehearsalId: 'rehearsal-1', allocationId: 'a'.repeat(64), generation: 1, bindingSha256: 'b'.repeat(64), receiptSha256: 'c'.repeat(64) },
  },
}];
