import type { ITypedContract } from './admin.js';
import type {
  IRuntimeLocalStorageClaim,
  IRuntimeLocalStorageClaimController,
  IRuntimeLocalStorageClaimReference,
  TRuntimeLocalStorageClaimNodeState,
} from '../data/runtimelocalstorageclaim.js';
import {
  runtimeLocalStorageClaimContract,
  runtimeLocalStorageClaimNodeStates,
  snapshotRuntimeLocalStorageClaim,
  validateRuntimeLocalStorageClaim,
  validateRuntimeLocalStorageClaimReference,
} from '../data/runtimelocalstorageclaim.js';
import {
  readServiceDataField,
  readServiceDataRecord,
  reasonsForUnknownKeys,
  validateServiceCanonicalId,
} from '../private/servicecontract.js';
import { collectValidatorReasons } from '../private/dataproperties.js';

/**
 * The node's authenticated runtime session as a controller names it. Project's own definition:
 * `id` names the session, `generation` counts its re-establishments; a request naming any other
 * pair than the node's current one is refused.
 */
export interface IRuntimeSessionReference {
  id: string;
  generation: number;
}

/**
 * What the receiving side trusts about the session a request arrived on: the session itself and
 * the controller, cluster, node and runtime namespace it was established for. Project's own definition.
 */
export interface IRuntimeLocalStorageTrustedSession {
  session: IRuntimeSessionReference;
  controller: IRuntimeLocalStorageClaimController;
  clusterId: string;
  nodeId: string;
  runtimeNamespace: string;
}

export type TApplyRuntimeLocalStorageClaimStatus = 'accepted' | 'replay' | 'historical';

export interface IApplyRuntimeLocalStorageClaimRequest {
  session: IRuntimeSessionReference;
  claim: IRuntimeLocalStorageClaim;
}

export interface IApplyRuntimeLocalStorageClaimResponse {
  status: TApplyRuntimeLocalStorageClaimStatus;
  state: TRuntimeLocalStorageClaimNodeState;
  /** The sent claim's reference; for `historical`, the newer generation the node holds. */
  claim: IRuntimeLocalStorageClaimReference;
}

/** Cloudly (or Onebox) → the node, over the node's authenticated session (through the cluster relay). */
export type IReq_Controller_Pallet_ApplyRuntimeLocalStorageClaim = ITypedContract<
  'applyRuntimeLocalStorageClaim',
  IApplyRuntimeLocalStorageClaimRequest,
  IApplyRuntimeLocalStorageClaimResponse
>;

/**
 * Relay → Cloudly: the current runtime session of one node of the relay's cluster, so Cloudly can
 * address claims to it. Project's own method; the relay socket names the cluster.
 * `resolvedWorkloadAuthorities` is how many workload authorities the session resolved: a node
 * whose session resolved fewer than a service needs (`runtimeConfigContract.requiredWorkloadAuthorities`)
 * is not handed the service (`node-authority-unsupported`); absent, nothing is judged.
 */
export type IReq_Relay_Cloudly_ReportRuntimeNodeSession = ITypedContract<
  'reportRuntimeNodeSession',
  { nodeId: string; session: IRuntimeSessionReference; resolvedWorkloadAuthorities?: number },
  { accepted: true; pushedClaims: number }
>;

const bindError = (reasonsArg: string[]): never => {
  throw new TypeError(`${runtimeLocalStorageClaimContract.error} ${reasonsArg.join('; ')}`);
};

const sessionReasons = (valueArg: unknown, pathArg: string): string[] => {
  const record = readServiceDataRecord(valueArg);
  if (record === null) {
    return [`${pathArg} must be a plain object`];
  }
  const reasons = reasonsForUnknownKeys(record, ['id', 'generation'], pathArg);
  reasons.push(...validateServiceCanonicalId(readServiceDataField(record, 'id'), `${pathArg}.id`));
  const generation = readServiceDataField(record, 'generation');
  if (!Number.isSafeInteger(generation) || (generation as number) < 1) {
    reasons.push(`${pathArg}.generation must be a positive integer`);
  }
  return reasons;
};

/** Every reason a value is not a valid `IRuntimeSessionReference`. */
export const validateRuntimeSessionReference = (valueArg: unknown, pathArg = 'session'): string[] =>
  collectValidatorReasons(pathArg, () => sessionReasons(valueArg, pathArg));

/**
 * Binds an apply request to the session it arrived on: the request's session must be the node's
 * current one, and the claim (valid, digest included) must name that session's controller,
 * cluster, node and runtime namespace. Answers a detached copy; throws with every reason.
 */
export const bindApplyRuntimeLocalStorageClaimRequest = async (
  requestArg: unknown,
  trustedSessionArg: IRuntimeLocalStorageTrustedSession,
): Promise<IApplyRuntimeLocalStorageClaimRequest> => {
  const shapeReasons = collectValidatorReasons('request', () => {
    const record = readServiceDataRecord(requestArg);
    if (record === null) {
      return ['request must be a plain object'];
    }
    return [
      ...reasonsForUnknownKeys(record, ['session', 'claim'], 'request'),
      ...sessionReasons(readServiceDataField(record, 'session'), 'request.session'),
    ];
  });
  if (shapeReasons.length > 0) {
    return bindError(shapeReasons);
  }
  const record = requestArg as Record<string, unknown>;
  const claimReasons = await validateRuntimeLocalStorageClaim(record.claim);
  if (claimReasons.length > 0) {
    return bindError(claimReasons);
  }
  const claim = snapshotRuntimeLocalStorageClaim(record.claim);
  const session = record.session as IRuntimeSessionReference;
  const reasons: string[] = [];
  if (session.id !== trustedSessionArg.session.id || session.generation !== trustedSessionArg.session.generation) {
    reasons.push("request.session must be the node's current session");
  }
  if (
    claim.controller.kind !== trustedSessionArg.controller.kind
    || claim.controller.id !== trustedSessionArg.controller.id
  ) {
    reasons.push("claim.controller must be the session's controller");
  }
  if (claim.clusterId !== trustedSessionArg.clusterId) {
    reasons.push("claim.clusterId must be the session's cluster");
  }
  if (claim.nodeId !== trustedSessionArg.nodeId) {
    reasons.push("claim.nodeId must be the session's node");
  }
  if (claim.runtimeNamespace !== trustedSessionArg.runtimeNamespace) {
    reasons.push("claim.runtimeNamespace must be the session's runtime namespace");
  }
  if (reasons.length > 0) {
    return bindError(reasons);
  }
  return { session: { id: session.id, generation: session.generation }, claim };
};

/**
 * Binds a node's answer to the claim that was sent. `accepted` and `replay` must name exactly the
 * sent reference and a state the claim can be in: a bound claim is `ready`, `import-required`
 * (import claims only) or `uncertain`; a purge is `purged` or `uncertain`. `historical` names a
 * newer generation of the same claim. Answers a detached copy; throws with every reason.
 */
export const bindApplyRuntimeLocalStorageClaimResponse = (
  responseArg: unknown,
  requestArg: IApplyRuntimeLocalStorageClaimRequest,
): IApplyRuntimeLocalStorageClaimResponse => {
  const sent = snapshotRuntimeLocalStorageClaim(requestArg.claim);
  const reasons = collectValidatorReasons('response', () => {
    const record = readServiceDataRecord(responseArg);
    if (record === null) {
      return ['response must be a plain object'];
    }
    const found = reasonsForUnknownKeys(record, ['status', 'state', 'claim'], 'response');
    const status = readServiceDataField(record, 'status');
    const state = readServiceDataField(record, 'state');
    if (status !== 'accepted' && status !== 'replay' && status !== 'historical') {
      found.push("response.status must be 'accepted', 'replay' or 'historical'");
    }
    if (!(runtimeLocalStorageClaimNodeStates as readonly unknown[]).includes(state)) {
      found.push("response.state must be 'ready', 'import-required', 'purged' or 'uncertain'");
    }
    const reference = readServiceDataField(record, 'claim');
    const referenceReasons = validateRuntimeLocalStorageClaimReference(reference, 'response.claim');
    found.push(...referenceReasons);
    if (referenceReasons.length > 0) {
      return found;
    }
    const answered = reference as IRuntimeLocalStorageClaimReference;
    if (answered.id !== sent.id) {
      found.push('response.claim.id must be the sent claim id');
    }
    if (status === 'historical') {
      if (answered.generation <= sent.generation) {
        found.push('response.claim of a historical answer must name a newer generation than the sent one');
      }
      return found;
    }
    if (answered.generation !== sent.generation || answered.digest !== sent.digest) {
      found.push('response.claim must be the sent claim reference');
    }
    const allowed: readonly string[] = sent.lifecycle === 'purge'
      ? ['purged', 'uncertain']
      : sent.initialization === 'import'
        ? ['ready', 'import-required', 'uncertain']
        : ['ready', 'uncertain'];
    if (typeof state === 'string' && (runtimeLocalStorageClaimNodeStates as readonly string[]).includes(state)
      && !allowed.includes(state)) {
      found.push(`response.state '${state}' is not a state the sent claim can be in`);
    }
    return found;
  });
  if (reasons.length > 0) {
    return bindError(reasons);
  }
  const record = responseArg as IApplyRuntimeLocalStorageClaimResponse;
  return {
    status: record.status,
    state: record.state,
    claim: { id: record.claim.id, generation: record.claim.generation, digest: record.claim.digest },
  };
};
