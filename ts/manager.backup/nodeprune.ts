import type { DocumentStore } from '../core/store.js';
import { isRefusal } from '../core/errors.js';
import { relayCallRefusal } from '../core/relaycalls.js';
import { maximumArchiveRetentionCount, type IArchivePruneResult, type IArchiveRetentionPolicy } from '../interfaces/data/backup.js';
import type { ICloudlyOutboundMethods } from '../interfaces/requests/methodmap.js';
import { clusterKind } from '../manager.cluster/documents.js';
import { serviceBackupKind } from './documents.js';
import { readPruneClusterNodeArchiveAnswer } from './relayanswers.js';
import { serviceBackupDeletionKind } from './retentionplan.js';

/**
 * The node side of a backup deletion: the relay is asked to prune the node's archive
 * (`pruneClusterNodeArchive`) with the retention the backups Cloudly keeps on that node imply.
 *
 * A node applies a retention to each service's snapshots apart (restic's `forget` groups by host
 * and paths), and a retention is counts, not ids: the policy Cloudly sends is the smallest
 * `keepLast` whose preview (the contract's own `dryRun`) keeps every snapshot of every backup
 * Cloudly still holds on the node, plus one per backup of the node still running (its snapshot
 * is not there yet, and will be the newest). Whatever is older than that goes, whether Cloudly
 * deleted its backup just now, earlier, or never knew it. The preview is asked first because
 * only the node knows what its archive holds: a snapshot Cloudly deleted but the node kept (it
 * was newer than a kept one) still counts there.
 */

export interface INodePrunePorts {
  store: DocumentStore;
  /** Why a cluster is dark (its liveness verdict is `unknown`), or null while it is current. */
  darkReasonOf(clusterIdArg: string): Promise<string | null>;
  /** `pruneClusterNodeArchive` on the cluster's relay; the answer is read with the contract's checks here. */
  prune(clusterIdArg: string, requestArg: ICloudlyOutboundMethods['pruneClusterNodeArchive']['request']): Promise<unknown>;
}

export type TNodePruneOutcome =
  | { outcome: 'pruned'; found: boolean; retention?: IArchiveRetentionPolicy; result?: IArchivePruneResult }
  /** Not done now; tried again when the relay is back (the deletion stays recorded as waiting). */
  | { outcome: 'waiting'; reason: string; detail?: string };

export const nodePruneWaitReasons = {
  /** The cluster's liveness verdict is `unknown`: its relay is gone. */
  clusterUnknown: 'cluster-unknown',
  /** No keepLast up to the largest count keeps every snapshot Cloudly holds: nothing is pruned. */
  policyUnreachable: 'node-archive-policy-unreachable',
} as const;

/** The most previews one prune asks for before it gives up for now. */
const maximumPreviews = 8;

/** The first reason of a relay call's refusal (`relay-not-connected`, `relay-timeout`, `relay-refused`, ...). */
const reasonOfFailure = (errorArg: unknown): { reason: string; detail?: string } => {
  const refusal = isRefusal(errorArg) && (errorArg.errorData as { code?: string })?.code === 'unavailable' ? errorArg : relayCallRefusal(errorArg);
  const data = refusal.errorData as { reasons?: string[]; relayError?: { code: string | null; reasons: string[] } };
  const detail = data.relayError ? [data.relayError.code, ...data.relayError.reasons].filter(Boolean).join(' ') : undefined;
  return { reason: data.reasons?.[0] ?? 'relay-failed', ...(detail ? { detail } : {}) };
};

export const pruneNodeArchiveOfDeletions = async (
  portsArg: INodePrunePorts,
  clusterIdArg: string,
  nodeIdArg: string,
): Promise<TNodePruneOutcome> => {
  // A cluster that is gone took its nodes and their archives with it: nothing is left to prune.
  if (!(await portsArg.store.get(clusterKind, clusterIdArg))) {
    return { outcome: 'pruned', found: false };
  }
  const darkReason = await portsArg.darkReasonOf(clusterIdArg);
  if (darkReason !== null) {
    return { outcome: 'waiting', reason: nodePruneWaitReasons.clusterUnknown, detail: darkReason };
  }
  const deleting = new Set((await portsArg.store.findFields(serviceBackupDeletionKind, { clusterId: clusterIdArg }, ['id'])).map((docArg) => docArg.id));
  const held = (await portsArg.store.find(serviceBackupKind, { clusterId: clusterIdArg, nodeId: nodeIdArg }))
    .filter((backupArg) => !deleting.has(backupArg.id));
  // Per service: the snapshot ids Cloudly keeps, and how many of its backups are still running.
  const keptOf = new Map<string, Set<string>>();
  const runningOf = new Map<string, number>();
  for (const backup of held) {
    const kept = keptOf.get(backup.serviceId) ?? new Set<string>();
    for (const snapshot of backup.snapshots) {
      kept.add(snapshot.snapshotId);
    }
    keptOf.set(backup.serviceId, kept);
    if (backup.state === 'running') {
      runningOf.set(backup.serviceId, (runningOf.get(backup.serviceId) ?? 0) + 1);
    }
  }
  const serviceOfSnapshot = new Map<string, string>();
  for (const [serviceId, kept] of keptOf) {
    for (const snapshotId of kept) {
      serviceOfSnapshot.set(snapshotId, serviceId);
    }
  }
  // A count can never be below what Cloudly keeps of one service: start there.
  let keepLast = Math.max(1, ...[...keptOf.values()].map((keptArg) => keptArg.size));
  try {
    for (let preview = 0; ; preview += 1) {
      const answer = readPruneClusterNodeArchiveAnswer(await portsArg.prune(clusterIdArg, { nodeId: nodeIdArg, retention: { keepLast }, dryRun: true }));
      if (!answer.found) {
        return { outcome: 'pruned', found: false };
      }
      const lostPerService = new Map<string, number>();
      for (const snapshotId of answer.result?.removedSnapshotIds ?? []) {
        const serviceId = serviceOfSnapshot.get(snapshotId);
        if (serviceId !== undefined) {
          lostPerService.set(serviceId, (lostPerService.get(serviceId) ?? 0) + 1);
        }
      }
      if (lostPerService.size === 0) {
        break;
      }
      // Each snapshot the preview would lose lies beyond the count: at least that many more are needed.
      keepLast += Math.max(...lostPerService.values());
      if (keepLast > maximumArchiveRetentionCount || preview + 1 >= maximumPreviews) {
        return { outcome: 'waiting', reason: nodePruneWaitReasons.policyUnreachable, detail: `keepLast ${keepLast} after ${preview + 1} previews` };
      }
    }
    const retention = { keepLast: Math.min(maximumArchiveRetentionCount, keepLast + Math.max(0, ...runningOf.values())) };
    const answer = readPruneClusterNodeArchiveAnswer(await portsArg.prune(clusterIdArg, { nodeId: nodeIdArg, retention }));
    return { outcome: 'pruned', found: answer.found, retention, ...(answer.result ? { result: answer.result } : {}) };
  } catch (error) {
    return { outcome: 'waiting', ...reasonOfFailure(error) };
  }
};
