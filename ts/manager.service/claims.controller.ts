import type { ICommittedChange } from '../core/changefeed.js';
import type { IController, IReconcileResult } from '../core/controller.js';
import type { DocumentStore } from '../core/store.js';
import { runtimeLocalStorageClaimKind, serviceKind, type IRuntimeLocalStorageClaimDocument } from './documents.js';

/** How often the leader looks for claims still waiting for a node's answer (a relay away, a node that did not answer). */
export const claimRetryIntervalMs = 5_000;

export const claimServiceKey = (serviceIdArg: string): string => `service:${serviceIdArg}`;
export const claimClusterKey = (clusterIdArg: string): string => `cluster:${clusterIdArg}`;

export interface IClaimsPorts {
  store: DocumentStore;
  /** Rolls a service's claims forward from its claim decisions and pushes what is pending. */
  rollForward: (serviceIdArg: string) => Promise<void>;
  /** Pushes every pending claim of the cluster through its relay (an offline relay leaves them pending). */
  pushPending: (clusterIdArg: string) => Promise<void>;
  /** Whether a claim document still waits for its node (its delivery pending, or an import still asked for). */
  needsPush: (docArg: IRuntimeLocalStorageClaimDocument) => boolean;
}

const ofOwningCluster = (changeArg: ICommittedChange): string[] => (changeArg.owners.clusterId ? [claimClusterKey(changeArg.owners.clusterId)] : []);

/**
 * The volume claims controller: the local storage claims Cloudly issues for services' volumes,
 * rolled forward from the claim decisions the service document commits (a first generation per
 * decision, a purge when a volume goes, a remount when its read-only flag changes) and pushed to
 * their nodes through the cluster's relay until a node answers. The only controller writing
 * `CloudlyRuntimeLocalStorageClaim` (a node's answer is recorded by the push it answers).
 * Keys: `service:<id>` rolls one service forward; `cluster:<id>` pushes a cluster's pending claims
 * (its relay registered, a node session was reported, or the retry poll found some pending).
 */
export class ClaimsController implements IController {
  public readonly name = 'claims';
  public readonly writes = [runtimeLocalStorageClaimKind.collectionName] as const;
  public readonly inputs: Readonly<Record<string, (changeArg: ICommittedChange) => readonly string[]>> = {
    CloudlyService: (changeArg) => [claimServiceKey(changeArg.id)],
    // Every registration, unchanged ones too: a relay that reconnected can take the pending pushes.
    CloudlyClusterRelayRegistration: ofOwningCluster,
    // A node's runtime session: claims are pushed under it.
    CloudlyRuntimeNodeSession: ofOwningCluster,
  };
  /** A service's claims follow its volumes and the claim decisions on it, nothing else of the spec. */
  public readonly inputViews = {
    CloudlyService: (docArg: Readonly<Record<string, unknown>>) => ({
      clusterId: docArg.clusterId,
      organizationId: docArg.organizationId,
      volumes: docArg.volumes,
      claimDecisions: docArg.claimDecisions,
    }),
  };
  public readonly poll = { everyMs: claimRetryIntervalMs, keys: () => this.pendingClusters() };
  /** The poll retries pending pushes; the resync has nothing to add. */
  public readonly resync = false;

  constructor(private readonly ports: IClaimsPorts) {}

  /** A start (or a new leader) rolls every service forward: whatever a previous run decided but did not finish. */
  public async all(): Promise<readonly string[]> {
    const services = await this.ports.store.findFields(serviceKind, {}, ['id']);
    return services.map((service) => claimServiceKey(String(service.id)));
  }

  private async pendingClusters(): Promise<readonly string[]> {
    const claims = await this.ports.store.find(runtimeLocalStorageClaimKind, {});
    return [...new Set(claims.filter((docArg) => this.ports.needsPush(docArg)).map((docArg) => claimClusterKey(docArg.clusterId)))];
  }

  public async reconcile(keyArg: string): Promise<IReconcileResult> {
    if (keyArg.startsWith('service:')) {
      await this.ports.rollForward(keyArg.slice('service:'.length));
    } else if (keyArg.startsWith('cluster:')) {
      await this.ports.pushPending(keyArg.slice('cluster:'.length));
    }
    return { outcome: 'refreshed' };
  }
}
