import type { TDecision } from '../core/store.js';
import { contractRefusal, refuseNamed } from '../core/errors.js';
import { canonicalizeJson } from '../interfaces/private/canonicaljson.js';
import type { IService } from '../interfaces/data/service.js';
import {
  snapshotServiceVolumeInitialization,
  type IServiceVolumeInitializationErrorData,
  type TServiceVolumeInitialization,
  type TServiceVolumeInitializationErrorCode,
} from '../interfaces/data/servicevolume.js';
import type { IRuntimeLiveness, IServiceRuntimeStatus } from '../interfaces/data/serviceruntimestatus.js';
import type { IRuntimeLocalStorageClaimRecord, IRuntimeLocalStorageClaimReference } from '../interfaces/data/runtimelocalstorageclaim.js';
import type { IServiceVolumeClaimDecision } from './claims.js';
import type { IServiceHistoricalClaim } from '../interfaces/requests/service.js';
import type {
  IRuntimeLocalStorageClaimDocument,
  IServiceDocument,
  IServiceRuntimeStatusDocument,
} from './documents.js';

/**
 * The service manager's decisions as pure functions over what the store read: each answers the
 * `store.mutate` decision for one write, so tests call them directly.
 */

export const volumeRefusal = (
  codeArg: TServiceVolumeInitializationErrorCode,
  reasonsArg?: string[],
): ReturnType<typeof contractRefusal> => {
  const errorData: IServiceVolumeInitializationErrorData = { code: codeArg, retryable: false };
  if (reasonsArg && reasonsArg.length > 0) {
    errorData.reasons = reasonsArg;
  }
  return contractRefusal('The volume initialization was refused.', errorData);
};

export const sameInitialization = (
  leftArg: TServiceVolumeInitialization | null | undefined,
  rightArg: TServiceVolumeInitialization | null | undefined,
): boolean => {
  if (leftArg === undefined || leftArg === null || rightArg === undefined || rightArg === null) {
    return (leftArg ?? null) === (rightArg ?? null);
  }
  return canonicalizeJson(snapshotServiceVolumeInitialization(leftArg))
    === canonicalizeJson(snapshotServiceVolumeInitialization(rightArg));
};

export interface IVolumeInitializationChange {
  serviceId: string;
  mountPath: string;
  /** The initialization the caller read (null: none). */
  expected: TServiceVolumeInitialization | null;
  /** The initialization wanted (null: remove it), already a detached copy. */
  wanted: TServiceVolumeInitialization | null;
  now: number;
}

/**
 * Sets (or removes) one volume's initialization, compare-and-swap on the initialization the
 * caller read: a missing service or volume, another stored initialization, or a claim already
 * decided for the volume refuse; otherwise the volumes change and the claim decisions are taken
 * again for the new state (`decideClaims`, which may issue a claim now).
 */
export const decideVolumeInitialization = (
  currentArg: IServiceDocument | null,
  changeArg: IVolumeInitializationChange,
  viewOfArg: (docArg: IServiceDocument) => IService,
  decideClaimsArg: (serviceArg: IService, existingArg: IServiceVolumeClaimDecision[]) => IServiceVolumeClaimDecision[],
): TDecision<IServiceDocument> => {
  const index = currentArg?.volumes.findIndex((volume) => volume.mountPath === changeArg.mountPath) ?? -1;
  if (!currentArg || index < 0) {
    return {
      kind: 'refuse',
      refusal: volumeRefusal('volume-not-found', [
        currentArg
          ? `service ${changeArg.serviceId} has no volume mounted at exactly that path`
          : `service ${changeArg.serviceId} does not exist`,
      ]),
    };
  }
  const volume = currentArg.volumes[index];
  if (!sameInitialization(volume.initialization, changeArg.expected)) {
    return { kind: 'refuse', refusal: volumeRefusal('conflict', ['the stored initialization is not the expected one']) };
  }
  if (currentArg.claimDecisions.some((decision) => decision.mountPath === volume.mountPath)) {
    return {
      kind: 'refuse',
      refusal: volumeRefusal('volume-initialization-bound', [
        'a bound local storage claim of this volume exists; its initialization can no longer change',
      ]),
    };
  }
  const volumes = currentArg.volumes.map((stored, position) => {
    if (position !== index) {
      return stored;
    }
    const { initialization: _old, ...rest } = stored;
    return changeArg.wanted === null ? rest : { ...rest, initialization: changeArg.wanted };
  });
  const view: IService = { ...viewOfArg(currentArg), volumes, updatedAt: changeArg.now };
  return {
    kind: 'write',
    change: { set: { volumes, updatedAt: changeArg.now, claimDecisions: decideClaimsArg(view, currentArg.claimDecisions) } },
  };
};

/**
 * The stored runtime verdict of a service: kept while the spec revision, state and reason are
 * the stored ones (so `changedAt` moves only when the verdict changes), written otherwise.
 */
/** A judged verdict: the contract's status fields, and, while its cluster is not current, why (the project's own). */
export type IJudgedVerdict = Pick<IServiceRuntimeStatus, 'specRevision' | 'state' | 'reason'> & { unknown?: IRuntimeLiveness };

const sameUnknown = (leftArg: IRuntimeLiveness | undefined, rightArg: IRuntimeLiveness | undefined): boolean =>
  leftArg === rightArg || (leftArg !== undefined && rightArg !== undefined && leftArg.reason === rightArg.reason && leftArg.since === rightArg.since);

/** Whether the stored verdict already says what was judged. Pure. */
export const isStoredVerdict = (storedArg: IServiceRuntimeStatusDocument, verdictArg: IJudgedVerdict): boolean =>
  storedArg.specRevision === verdictArg.specRevision
  && storedArg.state === verdictArg.state
  && storedArg.reason === verdictArg.reason
  && sameUnknown(storedArg.unknown, verdictArg.unknown);

/**
 * The stored verdict moves only when the judged one differs; `changedAt` (the contract's: when the
 * state last changed) moves only with the state, its reason or the spec revision, not when only
 * the cluster's liveness did.
 */
export const decideRuntimeStatus = (
  storedArg: IServiceRuntimeStatusDocument | null,
  serviceIdArg: string,
  verdictArg: IJudgedVerdict & { clusterId?: string },
  nowArg: number,
): TDecision<IServiceRuntimeStatusDocument> => {
  if (storedArg && isStoredVerdict(storedArg, verdictArg)) {
    return { kind: 'keep' };
  }
  const stateMoved = !storedArg || storedArg.specRevision !== verdictArg.specRevision
    || storedArg.state !== verdictArg.state || storedArg.reason !== verdictArg.reason;
  const next = {
    ...(verdictArg.clusterId === undefined ? {} : { clusterId: verdictArg.clusterId }),
    specRevision: verdictArg.specRevision,
    state: verdictArg.state,
    reason: verdictArg.reason,
    changedAt: stateMoved ? nowArg : storedArg!.changedAt,
    ...(verdictArg.unknown ? { unknown: { ...verdictArg.unknown } } : {}),
  };
  if (!storedArg) {
    return { kind: 'create', doc: { id: serviceIdArg, ...next } };
  }
  return { kind: 'write', change: { set: next, ...(verdictArg.unknown || !storedArg.unknown ? {} : { unset: ['unknown'] }) } };
};

/**
 * Records a node's bound answer on the claim generation it answered: nothing when the claim is
 * gone or a newer generation (or another digest) replaced the one the answer is about.
 */
export const decideClaimAnswer = (
  latestArg: IRuntimeLocalStorageClaimDocument | null,
  sentArg: { generation: number; digest: string },
  answerArg: {
    state: IRuntimeLocalStorageClaimDocument['current']['nodeState'];
    status: IRuntimeLocalStorageClaimDocument['current']['answerStatus'];
    claim: IRuntimeLocalStorageClaimReference;
  },
  nowArg: number,
): TDecision<IRuntimeLocalStorageClaimDocument> => {
  if (!latestArg || latestArg.current.claim.generation !== sentArg.generation || latestArg.current.claim.digest !== sentArg.digest) {
    return { kind: 'keep' };
  }
  const { nodeClaim: _earlier, ...current } = latestArg.current;
  return {
    kind: 'write',
    change: {
      set: {
        current: {
          ...current,
          delivery: 'answered',
          nodeState: answerArg.state,
          answerStatus: answerArg.status,
          lastDeliveryError: null,
          answeredAt: nowArg,
          // The node's newer generation is what an administrator supersedes (decideHistoricalSupersession).
          ...(answerArg.status === 'historical' ? { nodeClaim: { ...answerArg.claim } } : {}),
        },
      },
    },
  };
};

/**
 * A claim whose node answered `historical`: the node holds a newer generation than the one Cloudly
 * issued (another controller wrote it, or Cloudly's database went back in time). Pushing Cloudly's
 * older generations again would only be answered `historical` again, so nothing moves the claim on
 * until an administrator supersedes the node's generation.
 */
export const isHeldHistorical = (docArg: IRuntimeLocalStorageClaimDocument): boolean =>
  docArg.current.answerStatus === 'historical' && docArg.current.nodeClaim !== undefined;

/** The claims held historical, as the service's runtime status names them (in the order given). */
export const historicalClaimsOf = (docsArg: readonly IRuntimeLocalStorageClaimDocument[]): IServiceHistoricalClaim[] =>
  docsArg.filter(isHeldHistorical).map((docArg) => ({
    claimId: docArg.id,
    nodeId: docArg.nodeId,
    mountPath: docArg.mountPath,
    generation: docArg.current.claim.generation,
    nodeClaim: { ...docArg.current.nodeClaim! },
    answeredAt: docArg.current.answeredAt,
  }));

/**
 * An administrator supersedes the node's newer generation of a held historical claim: Cloudly issues
 * `nextArg`, its own current intent chained to the node's generation (built beforehand from the claim
 * as read), provided the claim is still held historical at exactly the generation the administrator
 * named and the node still holds the generation `nextArg` chains to.
 */
export const decideHistoricalSupersession = (
  docArg: IRuntimeLocalStorageClaimDocument | null,
  requestArg: { claimId: string; generation: number },
  nextArg: IRuntimeLocalStorageClaimRecord | null,
  retainedHistoryArg: number,
): TDecision<IRuntimeLocalStorageClaimDocument> => {
  if (!docArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', 'claim-not-found', `local storage claim ${requestArg.claimId} does not exist`) };
  }
  const nodeClaim = docArg.current.nodeClaim;
  if (docArg.current.claim.generation !== requestArg.generation || !isHeldHistorical(docArg) || nextArg === null
    || nodeClaim === undefined || nextArg.claim.previous?.generation !== nodeClaim.generation || nextArg.claim.previous.digest !== nodeClaim.digest) {
    return {
      kind: 'refuse',
      refusal: refuseNamed('conflict', 'claim-generation-not-historical',
        `${requestArg.generation} is not a generation of the claim its node answered historical `
          + `(current generation ${docArg.current.claim.generation}, answer ${docArg.current.answerStatus ?? 'none'})`, 'request.generation'),
    };
  }
  return {
    kind: 'write',
    change: { set: { current: nextArg, history: [...docArg.history, docArg.current].slice(-retainedHistoryArg) } },
  };
};

/**
 * A claim whose node answered `uncertain` for its current generation, not yet released by an
 * administrator: the node can vouch for the volume neither way, so nothing moves it on.
 */
export const isHeldUncertain = (docArg: IRuntimeLocalStorageClaimDocument): boolean =>
  docArg.current.nodeState === 'uncertain'
  && docArg.releasedUncertainGeneration !== docArg.current.claim.generation;

/** An administrator releases the held uncertain generation they name, and only that one. */
export const decideUncertainRelease = (
  docArg: IRuntimeLocalStorageClaimDocument | null,
  claimIdArg: string,
  generationArg: number,
): TDecision<IRuntimeLocalStorageClaimDocument> => {
  if (!docArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', 'claim-not-found', `local storage claim ${claimIdArg} does not exist`) };
  }
  if (docArg.current.claim.generation !== generationArg || !isHeldUncertain(docArg)) {
    return {
      kind: 'refuse',
      refusal: refuseNamed('conflict', 'claim-generation-not-held-uncertain',
        `${generationArg} is not a held uncertain generation of the claim `
          + `(current generation ${docArg.current.claim.generation}, node state ${docArg.current.nodeState ?? 'none'})`, 'request.generation'),
    };
  }
  return { kind: 'write', change: { set: { releasedUncertainGeneration: generationArg } } };
};
