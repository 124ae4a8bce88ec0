import { contractValue, UsageError } from './context.js';
import { isRecord } from '../interfaces/private/dataproperties.js';
import { validateClusterNodeCorestore, type IClusterNodeCorestore } from '../interfaces/data/clusternode.js';
import { snapshotClusterIngressDesignationRequest, type IClusterIngressDesignationRequest } from '../interfaces/data/clusteringressdesignation.js';
import { validatePlatformBindingUpsert, type IPlatformBindingUpsert } from '../interfaces/data/platformbinding.js';
import {
  snapshotRuntimeNetworkAddressPlan, validateRuntimeNetworkAddressPlan, type IRuntimeNetworkAddressPlan,
} from '../interfaces/data/runtimenetworkaddressplan.js';
import { validateServiceWritableSpec, type IServiceWritableSpec } from '../interfaces/data/service.js';
import { validateServiceVolumeInitialization, type TServiceVolumeInitialization } from '../interfaces/data/servicevolume.js';

/**
 * JSON a command reads (a `--file` body, a JSON `--expect`) as the contract's type, judged by the
 * contract's own validators: a value is the type exactly when they find no reason, and anything
 * else is a usage error listing every reason (nothing is sent). Loaded only by the commands that
 * read such JSON: the validators bring the canonical-JSON package, which `clusters list` and the
 * other commands do not load (test/cli.binary.built.test.ts).
 */

const isClusterNodeCorestore = (valueArg: unknown): valueArg is IClusterNodeCorestore => validateClusterNodeCorestore(valueArg).length === 0;
const isServiceWritableSpec = (valueArg: unknown): valueArg is IServiceWritableSpec => validateServiceWritableSpec(valueArg).length === 0;
const isServiceVolumeInitialization = (valueArg: unknown): valueArg is TServiceVolumeInitialization =>
  validateServiceVolumeInitialization(valueArg).length === 0;
const isPlatformBindingUpsert = (valueArg: unknown): valueArg is IPlatformBindingUpsert => validatePlatformBindingUpsert(valueArg).length === 0;
const isRuntimeNetworkAddressPlan = (valueArg: unknown): valueArg is IRuntimeNetworkAddressPlan => validateRuntimeNetworkAddressPlan(valueArg).length === 0;

/** A body given as `{ "<member>": … }` or as the member's value itself. */
const bodyMember = (valueArg: unknown, memberArg: string): unknown =>
  (isRecord(valueArg) && isRecord(valueArg[memberArg]) ? valueArg[memberArg] : valueArg);

/** A node's Corestore as `--expect` gives it in JSON. */
export const corestoreOf = (valueArg: unknown, flagArg: string): IClusterNodeCorestore =>
  contractValue(valueArg, isClusterNodeCorestore, (corestoreArg) => validateClusterNodeCorestore(corestoreArg, flagArg), flagArg);

/** A spec file (`{ service: … }` or the spec itself) as the writable spec. */
export const serviceSpecOf = (bodyArg: unknown, pathArg: string): IServiceWritableSpec =>
  contractValue(bodyMember(bodyArg, 'service'), isServiceWritableSpec, (specArg) => validateServiceWritableSpec(specArg), `the spec in ${pathArg}`);

/** A volume initialization as `--expect` gives it in JSON. */
export const volumeInitializationOf = (valueArg: unknown, flagArg: string): TServiceVolumeInitialization =>
  contractValue(valueArg, isServiceVolumeInitialization, (initializationArg) => validateServiceVolumeInitialization(initializationArg, flagArg), flagArg);

/** A binding file (`{ platformBinding: … }` or the binding itself) as an upsert. */
export const platformBindingOf = (bodyArg: unknown, pathArg: string): IPlatformBindingUpsert =>
  contractValue(bodyMember(bodyArg, 'platformBinding'), isPlatformBindingUpsert, (bindingArg) => validatePlatformBindingUpsert(bindingArg), `the binding in ${pathArg}`);

/** A plan file (`{ plan: … }` or the plan itself) as a detached address plan. */
export const addressPlanOf = (bodyArg: unknown, pathArg: string): IRuntimeNetworkAddressPlan => {
  const body = bodyMember(bodyArg, 'plan');
  return contractValue(snapshotRuntimeNetworkAddressPlan(body), isRuntimeNetworkAddressPlan, () => validateRuntimeNetworkAddressPlan(body), `the plan in ${pathArg}`);
};

/** A designation file (`{ designation: … }` or the request itself) as the request, detached. */
export const designationRequestOf = (bodyArg: unknown, pathArg: string): IClusterIngressDesignationRequest => {
  try {
    return snapshotClusterIngressDesignationRequest(bodyMember(bodyArg, 'designation'));
  } catch {
    throw new UsageError(`the designation in ${pathArg} is not what the contract takes: it must hold exactly mutationId, clusterId, ingressServiceId, `
      + 'currentRuntime (the cluster\'s runtime, in phase pallet), expectedSpecRevision and expectedDesignation (null, or { id, generation, digest })');
  }
};
