import { computeDomainDigestHex } from '../private/canonicaljson.js';
import {
  isCanonicalId,
  isCounter,
  isPositiveCounter,
  isRecord,
  isSha256Hex,
  type TPlainRecord,
} from '../private/dataproperties.js';
import type { TSha256Digest } from './immutableimage.js';
import { type IClusterRuntimeReference, snapshotClusterRuntimeReference } from './clusterruntime.js';
import type { IRuntimeAuthorityReference } from './runtimeassignment.js';
import type { ISecretVersionReference } from './secret.js';

/**
 * How a cluster born on Pallet names its ingress. Such a cluster never had a Swarm fleet to cut
 * over, so instead of a fleet-cutover designation it carries this record: which service is the
 * ingress and which managed credential it registers with. A cluster holds one kind of designation
 * or the other, never both. The nodes the ingress runs on are the ingress service's placement.
 */

/** The public identity of one generation of the ingress bearer. It never holds the bearer itself. */
export interface IClusterIngressCredentialReference {
  credentialId: string;
  generation: number;
  secretVersion: ISecretVersionReference;
}

/**
 * Cloudly's accepted choice of one service as a Pallet cluster's ingress. Accepting it starts no
 * workload and admits no registration by itself: the ingress still has to register with the
 * credential named here.
 */
export interface IClusterIngressDesignation {
  id: string;
  generation: number;
  previous: IRuntimeAuthorityReference | null;
  clusterId: string;
  runtime: IClusterRuntimeReference & { phase: 'pallet' };
  ingressServiceId: string;
  /** The ingress service's runtime spec revision this designation was accepted against. */
  preparedSpecRevision: number;
  credential: IClusterIngressCredentialReference;
  actorId: string;
  acceptedAt: number;
  digest: TSha256Digest;
}

/**
 * What an administrator asks for: only the values a compare-and-swap needs. The credential and the
 * acceptance are Cloudly's to produce.
 */
export interface IClusterIngressDesignationRequest {
  mutationId: string;
  clusterId: string;
  ingressServiceId: string;
  currentRuntime: IClusterRuntimeReference & { phase: 'pallet' };
  expectedSpecRevision: number;
  /** `null` to create; otherwise the exact designation being replaced (rotation or another service). */
  expectedDesignation: IRuntimeAuthorityReference | null;
}

/**
 * The ingress designation of a cluster that came from a Swarm fleet, made by the fleet cutover and
 * not by `designateClusterIngress`. Project's own minimal definition: the cutover scope, census and
 * target set it belongs to are outside this project, so it holds only what the one-kind rule needs.
 */
export interface IFleetCutoverIngressDesignation {
  id: string;
  generation: number;
  clusterId: string;
  ingressServiceId: string;
  acceptedAt: number;
  /**
   * The credential the ingress registers with, minted by Cloudly when it records the designation
   * (its value is kept like a Pallet designation's bearer and reaches the relay only sealed).
   * Absent on records made before Cloudly minted one: registrations under such a record are judged
   * as far as the facts go and then refused `bearer-refused`, since no bearer can be checked.
   */
  credential?: IClusterIngressCredentialReference;
}

export const clusterIngressDesignationContract = Object.freeze({
  digestDomain: 'serve.zone/cluster-ingress-designation',
  error: 'Cluster ingress designation contract rejected.',
} as const);

/** Bounds for reading a value that crossed a wire, so a hostile value cannot exhaust the reader. */
const captureLimits = Object.freeze({ maximumDepth: 16, maximumNodes: 4096, maximumStringLength: 4096 });

class DesignationRejected extends Error {
  constructor() {
    super(clusterIngressDesignationContract.error);
  }
}

const reject = (): never => {
  throw new DesignationRejected();
};

const demand = (conditionArg: boolean): void => {
  if (!conditionArg) {
    reject();
  }
};

/** Runs a reader and turns whatever it throws into the contract's one error, never a detail. */
const guarded = <T>(readerArg: () => T): T => {
  try {
    return readerArg();
  } catch {
    return reject();
  }
};

/**
 * A detached deep copy of plain JSON data, read through own data descriptors only: getters, class
 * instances, sparse or exotic arrays, non-finite numbers and oversized values are refused.
 */
const capturePlainData = (valueArg: unknown): unknown => {
  let nodes = 0;
  const visit = (valueArg2: unknown, depthArg: number): unknown => {
    nodes += 1;
    demand(nodes <= captureLimits.maximumNodes && depthArg <= captureLimits.maximumDepth);
    if (valueArg2 === null || typeof valueArg2 === 'boolean') {
      return valueArg2;
    }
    if (typeof valueArg2 === 'string') {
      demand(valueArg2.length <= captureLimits.maximumStringLength);
      return valueArg2;
    }
    if (typeof valueArg2 === 'number') {
      demand(Number.isFinite(valueArg2));
      return valueArg2;
    }
    if (Array.isArray(valueArg2)) {
      demand(Object.getPrototypeOf(valueArg2) === Array.prototype);
      const copy: unknown[] = [];
      for (let index = 0; index < valueArg2.length; index += 1) {
        const descriptor = Object.getOwnPropertyDescriptor(valueArg2, index);
        demand(descriptor !== undefined && 'value' in descriptor);
        copy.push(visit(descriptor!.value, depthArg + 1));
      }
      return copy;
    }
    demand(isRecord(valueArg2));
    const copy: TPlainRecord = {};
    for (const [key, descriptor] of Object.entries(Object.getOwnPropertyDescriptors(valueArg2 as object))) {
      demand('value' in descriptor && descriptor.enumerable === true);
      copy[key] = visit(descriptor.value, depthArg + 1);
    }
    return copy;
  };
  return visit(valueArg, 0);
};

const exactRecord = (valueArg: unknown, keysArg: readonly string[]): TPlainRecord => {
  demand(isRecord(valueArg));
  const record = valueArg as TPlainRecord;
  const keys = Object.keys(record);
  demand(keys.length === keysArg.length && keysArg.every((key) => Object.hasOwn(record, key)));
  return record;
};

const readId = (valueArg: unknown): string => {
  demand(isCanonicalId(valueArg));
  return valueArg as string;
};

const readCounter = (valueArg: unknown): number => {
  demand(isCounter(valueArg));
  return valueArg as number;
};

const readGeneration = (valueArg: unknown): number => {
  demand(isPositiveCounter(valueArg));
  return valueArg as number;
};

const readDigest = (valueArg: unknown): TSha256Digest => {
  demand(isSha256Hex(valueArg));
  return valueArg as string;
};

const readAuthorityReference = (valueArg: unknown): IRuntimeAuthorityReference => {
  const value = exactRecord(valueArg, ['id', 'generation', 'digest']);
  return { id: readId(value.id), generation: readGeneration(value.generation), digest: readDigest(value.digest) };
};

const readPalletRuntime = (
  valueArg: unknown,
  clusterIdArg: string,
): IClusterRuntimeReference & { phase: 'pallet' } => {
  const runtime = snapshotClusterRuntimeReference(valueArg);
  demand(runtime.id === clusterIdArg && runtime.phase === 'pallet');
  return { id: runtime.id, phase: 'pallet', generation: runtime.generation };
};

const readCredential = (valueArg: unknown): IClusterIngressCredentialReference => {
  const value = exactRecord(valueArg, ['credentialId', 'generation', 'secretVersion']);
  const secretVersion = exactRecord(value.secretVersion, ['secretId', 'secretVersionId']);
  return {
    credentialId: readId(value.credentialId),
    generation: readGeneration(value.generation),
    secretVersion: {
      secretId: readId(secretVersion.secretId),
      secretVersionId: readId(secretVersion.secretVersionId),
    },
  };
};

/**
 * A detached, exact-schema copy of a designation request. Throws the contract's error for anything
 * else. `currentRuntime` must be the `pallet` runtime of the named cluster.
 */
export const snapshotClusterIngressDesignationRequest = (
  valueArg: unknown,
): IClusterIngressDesignationRequest => guarded(() => {
  const value = exactRecord(capturePlainData(valueArg), ['mutationId', 'clusterId', 'ingressServiceId',
    'currentRuntime', 'expectedSpecRevision', 'expectedDesignation']);
  const clusterId = readId(value.clusterId);
  return {
    mutationId: readId(value.mutationId),
    clusterId,
    ingressServiceId: readId(value.ingressServiceId),
    currentRuntime: readPalletRuntime(value.currentRuntime, clusterId),
    expectedSpecRevision: readCounter(value.expectedSpecRevision),
    expectedDesignation: value.expectedDesignation === null ? null : readAuthorityReference(value.expectedDesignation),
  };
});

/**
 * A detached, exact-schema copy of a designation; whether its digest is right is a separate check
 * (`validateClusterIngressDesignation`). Generation 1 has no predecessor; every later generation
 * names the generation just before it of the same designation.
 */
export const snapshotClusterIngressDesignation = (valueArg: unknown): IClusterIngressDesignation => guarded(() => {
  const value = exactRecord(capturePlainData(valueArg), ['id', 'generation', 'previous', 'clusterId', 'runtime',
    'ingressServiceId', 'preparedSpecRevision', 'credential', 'actorId', 'acceptedAt', 'digest']);
  const id = readId(value.id);
  const generation = readGeneration(value.generation);
  const previous = value.previous === null ? null : readAuthorityReference(value.previous);
  demand(generation === 1
    ? previous === null
    : previous !== null && previous.id === id && previous.generation === generation - 1);
  const clusterId = readId(value.clusterId);
  return {
    id,
    generation,
    previous,
    clusterId,
    runtime: readPalletRuntime(value.runtime, clusterId),
    ingressServiceId: readId(value.ingressServiceId),
    preparedSpecRevision: readCounter(value.preparedSpecRevision),
    credential: readCredential(value.credential),
    actorId: readId(value.actorId),
    acceptedAt: readCounter(value.acceptedAt),
    digest: readDigest(value.digest),
  };
});

/**
 * The designation's digest: the domain-separated sha256 of its canonical JSON with the `digest`
 * member left out (a digest cannot cover itself). The value must otherwise be a valid designation;
 * any well-formed placeholder digest may stand in while a new designation is being sealed.
 */
export const computeClusterIngressDesignationDigest = async (valueArg: unknown): Promise<TSha256Digest> => {
  const designation = snapshotClusterIngressDesignation(valueArg);
  const { digest: _ignored, ...covered } = designation;
  return guarded(() => computeDomainDigestHex(clusterIngressDesignationContract.digestDomain, covered));
};

/** Every reason a value is not a sealed designation (schema first, then digest). Never throws. */
export const validateClusterIngressDesignation = async (valueArg: unknown): Promise<string[]> => {
  let designation: IClusterIngressDesignation;
  try {
    designation = snapshotClusterIngressDesignation(valueArg);
  } catch {
    return ['cluster ingress designation must use its exact canonical schema'];
  }
  try {
    return designation.digest === await computeClusterIngressDesignationDigest(designation)
      ? []
      : ['cluster ingress designation digest does not match'];
  } catch {
    return ['cluster ingress designation must use its exact canonical schema'];
  }
};

/** The authority reference a successor or a compare-and-swap request names this designation by. */
export const referenceClusterIngressDesignation = (
  designationArg: IClusterIngressDesignation,
): IRuntimeAuthorityReference => ({
  id: designationArg.id,
  generation: designationArg.generation,
  digest: designationArg.digest,
});
