import type { IService } from '../interfaces/data/service.js';
import type { IServiceVolume } from '../interfaces/data/servicevolume.js';
import {
  getRuntimeLocalStorageClaimReference,
  sealRuntimeLocalStorageClaim,
  type IRuntimeLocalStorageClaim,
  type IRuntimeLocalStorageClaimController,
  type IRuntimeLocalStorageClaimOwnership,
  type IRuntimeLocalStorageClaimRecord,
  type IRuntimeLocalStorageClaimReference,
  type TRuntimeLocalStorageClaimUnsealed,
} from '../interfaces/data/runtimelocalstorageclaim.js';

/**
 * Pure builders of the claims Cloudly issues. The first generation takes its initialization and
 * ownership from the marker the service document recorded when the derive rule decided them;
 * every later generation copies them from the claim itself, whatever the service says by then.
 */

/** Cloudly as a claim controller. Project's own choice of id. */
export const cloudlyClaimController: IRuntimeLocalStorageClaimController = Object.freeze({ kind: 'cloudly', id: 'cloudly' });

/**
 * The runtime namespace Cloudly's workloads live in on every node. Project's own choice: one
 * namespace per controller, so a node session established for Cloudly names it.
 */
export const cloudlyRuntimeNamespace = 'cloudly';

/** The first-generation decision a service document records with a volume's claim. */
export interface IServiceVolumeClaimDecision {
  mountPath: string;
  claimId: string;
  nodeId: string;
  volumeId: string;
  initialization: 'empty' | 'import';
  initialOwnership: IRuntimeLocalStorageClaimOwnership | null;
}

export const buildFirstClaimGeneration = async (
  serviceArg: IService,
  volumeArg: IServiceVolume,
  decisionArg: IServiceVolumeClaimDecision,
): Promise<IRuntimeLocalStorageClaim> => {
  const common = {
    id: decisionArg.claimId,
    generation: 1,
    previous: null,
    controller: { ...cloudlyClaimController },
    organizationId: serviceArg.organizationId,
    clusterId: serviceArg.clusterId,
    nodeId: decisionArg.nodeId,
    runtimeNamespace: cloudlyRuntimeNamespace,
    serviceId: serviceArg.id,
    volumeId: decisionArg.volumeId,
    source: { kind: 'directory' as const },
    mount: { mountPath: volumeArg.mountPath, readOnly: volumeArg.readOnly },
    accessMode: 'ReadWriteOnce' as const,
    reclaimPolicy: 'retain' as const,
    lifecycle: 'bound' as const,
  };
  const unsealed: TRuntimeLocalStorageClaimUnsealed = decisionArg.initialization === 'import'
    ? { ...common, initialization: 'import', initialOwnership: null }
    : {
      ...common,
      initialization: 'empty',
      initialOwnership: decisionArg.initialOwnership as IRuntimeLocalStorageClaimOwnership,
    };
  return sealRuntimeLocalStorageClaim(unsealed);
};

/** The next generation of a claim: same identity, initialization and ownership; chained by `previous`. */
export const buildNextClaimGeneration = async (
  currentArg: IRuntimeLocalStorageClaim,
  changeArg: { lifecycle: 'bound' | 'purge'; readOnly: boolean },
): Promise<IRuntimeLocalStorageClaim> => {
  const { digest: _digest, ...rest } = currentArg;
  return sealRuntimeLocalStorageClaim({
    ...rest,
    generation: currentArg.generation + 1,
    previous: getRuntimeLocalStorageClaimReference(currentArg),
    mount: { mountPath: currentArg.mount.mountPath, readOnly: changeArg.readOnly },
    lifecycle: changeArg.lifecycle,
  } as TRuntimeLocalStorageClaimUnsealed);
};

/**
 * Cloudly's claim re-issued over a newer generation its node holds (after a `historical` answer):
 * Cloudly's own intent (identity, initialization, ownership, mount, lifecycle) as the generation after
 * the node's, chained to it by `previous`, so the node can accept it as the next step of its chain.
 */
export const buildClaimOverNodeGeneration = async (
  currentArg: IRuntimeLocalStorageClaim,
  nodeClaimArg: IRuntimeLocalStorageClaimReference,
): Promise<IRuntimeLocalStorageClaim> => {
  const { digest: _digest, ...rest } = currentArg;
  return sealRuntimeLocalStorageClaim({
    ...rest,
    generation: nodeClaimArg.generation + 1,
    previous: { id: nodeClaimArg.id, generation: nodeClaimArg.generation, digest: nodeClaimArg.digest },
  } as TRuntimeLocalStorageClaimUnsealed);
};

export const pendingClaimRecord = (claimArg: IRuntimeLocalStorageClaim, nowArg: number): IRuntimeLocalStorageClaimRecord => ({
  claim: claimArg,
  delivery: 'pending',
  nodeState: null,
  answerStatus: null,
  lastDeliveryError: null,
  issuedAt: nowArg,
  answeredAt: null,
});
