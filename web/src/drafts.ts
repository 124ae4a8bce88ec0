import type { TAdminCallRequest } from '../../ts/interfaces/requests/methodmap.js';
import type { IClusterRuntimeReference } from '../../ts/interfaces/data/clusterruntime.js';
import type { IClusterIngressDesignation } from '../../ts/interfaces/data/clusteringressdesignation.js';
import type { TIsolatedRestoreResourceMapping } from '../../ts/interfaces/data/backup.js';
import {
  normalizeIsolatedRestoreResourceMappings,
  validateIsolatedRestoreResourceMappings,
} from '../../ts/interfaces/data/isolatedrestore.js';
import {
  snapshotRuntimeNetworkAddressPlan,
  validateRuntimeNetworkAddressPlan,
} from '../../ts/interfaces/data/runtimenetworkaddressplan.js';

/**
 * Form drafts turned into contract requests. A page's form holds what the administrator typed
 * (JSON text), or facts read a moment ago that the contract narrows further (a runtime that must
 * be Pallet's); `api.call` takes only the contract's request for the method named. Each function
 * here checks a draft at run time and answers either that request, typed, or every reason it is
 * not one yet, in the contract's words, for the page to show. Nothing here casts.
 */
export type TDraft<TRequest> = { ok: true; request: TRequest } | { ok: false; reasons: string[] };

/** A draft the page could not make into a request: nothing was sent; the reasons are shown. */
export class DraftRefused extends Error {
  constructor(public readonly reasons: string[]) {
    super(reasons.join('; '));
    this.name = 'DraftRefused';
  }
}

/** The draft's request, or DraftRefused with its reasons (for a dialog that shows what it throws). */
export const requestOfDraft = <TRequest>(draftArg: TDraft<TRequest>): TRequest => {
  if (!draftArg.ok) {
    throw new DraftRefused(draftArg.reasons);
  }
  return draftArg.request;
};

/**
 * The value a `<select>` holds, as one of the contract's literals: the option equal to it, or null
 * for a value the list does not hold (a select offers only these, so null means no change).
 */
export const choiceOf = <TChoice extends string>(optionsArg: readonly TChoice[], valueArg: string): TChoice | null =>
  optionsArg.find((option) => option === valueArg) ?? null;

const parseJson = (textArg: string): { ok: true; value: unknown } | { ok: false; message: string } => {
  try {
    return { ok: true, value: JSON.parse(textArg) };
  } catch (error) {
    return { ok: false, message: error instanceof Error ? error.message : String(error) };
  }
};

/** The address plan editor's JSON as a `setRuntimeNetworkAddressPlan` request (the contract's validator decides). */
export const addressPlanRequestOfDraft = (textArg: string): TDraft<TAdminCallRequest<'setRuntimeNetworkAddressPlan'>> => {
  const parsed = parseJson(textArg);
  if (!parsed.ok) {
    return { ok: false, reasons: [`plan is not JSON: ${parsed.message}`] };
  }
  const reasons = validateRuntimeNetworkAddressPlan(parsed.value, 'plan');
  if (reasons.length > 0) {
    return { ok: false, reasons };
  }
  const plan = snapshotRuntimeNetworkAddressPlan(parsed.value);
  return plan ? { ok: true, request: { plan } } : { ok: false, reasons: ['plan could not be read as plain data'] };
};

/** The isolated restore form: the backup chosen, the node typed, the resource mappings typed as JSON. */
export interface IIsolatedRestoreDraft {
  backupId: string;
  targetNodeName: string;
  mappings: string;
}

/** Whether a value is a list of resource mappings, decided by the contract's own validator. */
const isIsolatedRestoreResourceMappingList = (valueArg: unknown): valueArg is TIsolatedRestoreResourceMapping[] =>
  validateIsolatedRestoreResourceMappings(valueArg, 'mappings').length === 0;

/**
 * The isolated restore form as a `createIsolatedRestore` request: every reason it is not one (the
 * node missing, the mappings not JSON, each mapping the contract refuses), else the request with
 * the mappings rebuilt key by key, as Cloudly digests them. The page adds the `mutationId` when it
 * sends (the form is judged on every keystroke; one action is one mutation).
 */
export const isolatedRestoreRequestOfDraft = (draftArg: IIsolatedRestoreDraft): TDraft<TAdminCallRequest<'createIsolatedRestore'>> => {
  const reasons: string[] = [];
  if (draftArg.targetNodeName.trim() === '') {
    reasons.push('targetNodeName must name the node to restore on');
  }
  const parsed = parseJson(draftArg.mappings);
  if (!parsed.ok) {
    return { ok: false, reasons: [...reasons, 'mappings must be JSON: an array of resource mappings'] };
  }
  // The guard is the contract's validator: the mappings are read once when they are right, and
  // their reasons are asked for only when they are not.
  if (reasons.length === 0 && isIsolatedRestoreResourceMappingList(parsed.value)) {
    return {
      ok: true,
      request: {
        backupId: draftArg.backupId,
        targetNodeName: draftArg.targetNodeName,
        mappings: normalizeIsolatedRestoreResourceMappings(parsed.value),
      },
    };
  }
  return { ok: false, reasons: [...reasons, ...validateIsolatedRestoreResourceMappings(parsed.value, 'mappings')] };
};

/** What the cluster page knows when the administrator designates an ingress. */
export interface IDesignationDraft {
  mutationId: string;
  clusterId: string;
  ingressService: { id: string; specRevision: number };
  /** The cluster's runtime as `getClusterRuntime` answered it just now. */
  runtime: IClusterRuntimeReference;
  /** The designation being replaced, as the overview showed it; null when there is none. */
  current: Pick<IClusterIngressDesignation, 'id' | 'generation' | 'digest'> | null;
}

/**
 * The designation as a `designateClusterIngress` request. The contract designates an ingress only
 * on a cluster whose runtime is in phase `pallet`; any other phase is said, and nothing is sent.
 */
export const designationRequestOfDraft = (draftArg: IDesignationDraft): TDraft<TAdminCallRequest<'designateClusterIngress'>> => {
  const runtime = draftArg.runtime;
  if (runtime.phase !== 'pallet') {
    return { ok: false, reasons: [`currentRuntime.phase is ${runtime.phase}: an ingress is designated only on a cluster in phase pallet`] };
  }
  const current = draftArg.current;
  return {
    ok: true,
    request: {
      designation: {
        mutationId: draftArg.mutationId,
        clusterId: draftArg.clusterId,
        ingressServiceId: draftArg.ingressService.id,
        currentRuntime: { id: runtime.id, phase: runtime.phase, generation: runtime.generation },
        expectedSpecRevision: draftArg.ingressService.specRevision,
        expectedDesignation: current ? { id: current.id, generation: current.generation, digest: current.digest } : null,
      },
    },
  };
};
