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
  type IRuntimeNetworkAddressPlan,
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

/**
 * The address plan form as typed: one field per member of the plan, lists one entry a line. The
 * revision is not typed: it is the one after the plan read (Cloudly's compare-and-swap token).
 */
export interface IAddressPlanForm {
  authorityId: string;
  revision: number;
  /** One prefix a line: `192.0.2.0/24`. */
  prefixes: string;
  /** One pool a line: `<id> <prefix>`. */
  pools: string;
  hubPrefix: string;
  peerPrefix: string;
  /** One hub a line: `<cluster id> <address>`. */
  hubs: string;
  /** One endpoint a line: `<id> <address>:<port>/<protocol>`. */
  platformEndpoints: string;
}

const formLines = (textArg: string): string[] => textArg.split('\n').map((line) => line.trim()).filter((line) => line.length > 0);

/** The form of a stored plan at its next revision, or an empty one at revision 1. */
export const addressPlanFormOf = (planArg: IRuntimeNetworkAddressPlan | null): IAddressPlanForm => (planArg
  ? {
    authorityId: planArg.authorityId,
    revision: planArg.revision + 1,
    prefixes: planArg.prefixes.join('\n'),
    pools: planArg.pools.map((pool) => `${pool.id} ${pool.prefix}`).join('\n'),
    hubPrefix: planArg.vpn.hubPrefix,
    peerPrefix: planArg.vpn.peerPrefix,
    hubs: planArg.hubs.map((hub) => `${hub.clusterId} ${hub.address}`).join('\n'),
    platformEndpoints: planArg.platformEndpoints.map((endpoint) => `${endpoint.id} ${endpoint.address}:${endpoint.port}/${endpoint.protocol}`).join('\n'),
  }
  : { authorityId: 'authority-1', revision: 1, prefixes: '', pools: '', hubPrefix: '', peerPrefix: '', hubs: '', platformEndpoints: '' });

/**
 * The address plan form as a `setRuntimeNetworkAddressPlan` request: a line that cannot be read
 * is named with its path, and what can be read is judged by the contract's validator (the same
 * reasons Cloudly answers), as `addressPlanRequestOfDraft` judges a plan typed as JSON.
 */
export const addressPlanRequestOfForm = (formArg: IAddressPlanForm): TDraft<TAdminCallRequest<'setRuntimeNetworkAddressPlan'>> => {
  const reasons: string[] = [];
  const pairs = (textArg: string, pathArg: string, shapeArg: string): Array<[string, string]> => formLines(textArg).flatMap((line, index): Array<[string, string]> => {
    const words = line.split(/\s+/);
    if (words.length !== 2) {
      reasons.push(`plan.${pathArg}[${index}] must be written "${shapeArg}"`);
      return [];
    }
    return [[words[0] ?? '', words[1] ?? '']];
  });
  // Read in the plan's member order, so the reasons come in the validator's order.
  const pools = pairs(formArg.pools, 'pools', '<id> <prefix>').map(([id, prefix]) => ({ id, prefix }));
  const hubs = pairs(formArg.hubs, 'hubs', '<cluster id> <address>').map(([clusterId, address]) => ({ clusterId, address }));
  const platformEndpoints = formLines(formArg.platformEndpoints).flatMap((line, index) => {
    const match = /^(\S+)\s+(\S+):(\d+)\/(\S+)$/.exec(line);
    if (!match) {
      reasons.push(`plan.platformEndpoints[${index}] must be written "<id> <address>:<port>/<protocol>"`);
      return [];
    }
    return [{ id: match[1], address: match[2], protocol: match[4], port: Number(match[3]) }];
  });
  const plan = {
    authorityId: formArg.authorityId.trim(),
    revision: formArg.revision,
    prefixes: formLines(formArg.prefixes),
    pools,
    vpn: { hubPrefix: formArg.hubPrefix.trim(), peerPrefix: formArg.peerPrefix.trim() },
    hubs,
    platformEndpoints,
  };
  if (reasons.length > 0) {
    return { ok: false, reasons };
  }
  return addressPlanRequestOfDraft(JSON.stringify(plan));
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
