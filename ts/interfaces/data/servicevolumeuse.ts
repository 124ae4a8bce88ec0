import type { IServiceRunAs } from './service.js';
import type { TServiceVolumeInitialization } from './servicevolume.js';

/**
 * Project's own judgement, for forms and the CLI before they send an initialization: whether the
 * runtime could use it for this service, and if not, what would work. It says in advance what
 * `deriveServiceVolumeClaimInitialization` would refuse once the service runs (an accepted
 * initialization can still leave the service refused). No imports but types, so the dashboard
 * bundles it as it is.
 */
export type TServiceVolumeInitializationUse =
  | { usable: true }
  | {
    usable: false;
    /** The runtime refusal the service would get. */
    reason: 'volume-initialization-unknown' | 'volume-ownership-unknown';
    /** Why, in a sentence. */
    why: string;
    /** What would work instead, in a sentence. */
    instead: string;
  };

export const judgeServiceVolumeInitializationUse = (
  initializationArg: TServiceVolumeInitialization | null,
  runAsArg: IServiceRunAs | null,
): TServiceVolumeInitializationUse => {
  if (initializationArg === null) {
    return {
      usable: false,
      reason: 'volume-initialization-unknown',
      why: 'without an initialization the runtime does not know how the volume starts',
      instead: 'start it empty (with an owner and a mode) or import a Docker volume',
    };
  }
  if (initializationArg.kind === 'empty' && initializationArg.ownership.kind === 'run-as' && runAsArg === null) {
    return {
      usable: false,
      reason: 'volume-ownership-unknown',
      why: 'the owner is to come from the service\'s run-as, and the service has none',
      instead: 'give an explicit owner (uid and gid), or give the service a run-as (runtime.profile.runAs) first',
    };
  }
  return { usable: true };
};
