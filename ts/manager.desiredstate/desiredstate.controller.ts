import type { ICommittedChange } from '../core/changefeed.js';
import { ofOwningCluster, ofOwningClusterInputs, type IController, type IReconcileResult } from '../core/controller.js';
import type { DocumentStore } from '../core/store.js';
import type { IClusterPlatformDesiredState } from '../interfaces/data/desiredstate.js';
import { allClusterIds, clusterKind } from '../manager.cluster/documents.js';
import { serviceKind } from '../manager.service/documents.js';
import { secretGroupKind } from '../manager.secret/secretgroups.js';
import { clusterDesiredStateKind } from './documents.js';

/** What the desired-state controller reads and does through its domain; built by the composition root. */
export interface IDesiredStateControllerPorts {
  store: DocumentStore;
  /** Computes the cluster's desired state and publishes it (and its route table) when it changed. */
  publish: (clusterIdArg: string) => Promise<{ state: IClusterPlatformDesiredState; published: boolean }>;
  /** Tells the cluster's relay the published revision. */
  hint: (clusterIdArg: string, stateArg: { revision: number; digest: string }) => Promise<void>;
  /** The route table's kind, written with the desired state. */
  routeTableKind: string;
  /** Forgets the service entries kept between computations (./serviceentries.ts): a full pass builds every one again. */
  forgetRemembered: () => void;
}

/** A service key (`service:<id>`): the cluster is the service's, read when the key runs (a binding names only its service). */
const serviceKeyPrefix = 'service:';
/** A secret group key (`secretgroup:<id>`): every cluster the group names, read when the key runs. */
const secretGroupKeyPrefix = 'secretgroup:';

/**
 * The desired-state controller: each cluster's published desired state and its one route table
 * (docs/desired-state.md), computed from the services, their bindings, the ingress designation,
 * the relay's origin, the nodes and their credentials and projections, and the lease statements;
 * published under a new revision only when the digest moved, and hinted to the relay then. The
 * only writer of `CloudlyClusterDesiredState` and `CloudlyClusterIngressRouteTable`. Keys are
 * cluster ids (and `service:<id>` for inputs that name only their service).
 */
export class DesiredStateController implements IController {
  public readonly name = 'desiredstate';
  public readonly writes: readonly string[];
  public readonly inputs: Readonly<Record<string, (changeArg: ICommittedChange) => readonly string[]>> = {
    CloudlyService: ofOwningCluster,
    CloudlyClusterIngressSlot: ofOwningCluster,
    // A binding names its service only: the key resolves the cluster when it runs.
    CloudlyPlatformBinding: (changeArg) => (changeArg.owners.serviceId ? [`${serviceKeyPrefix}${changeArg.owners.serviceId}`] : []),
    // Only the origin matters: a relay registering again with the same announcement changes nothing.
    CloudlyClusterRelayRegistration: ofOwningClusterInputs,
    CloudlyCorestoreCredential: ofOwningCluster,
    CloudlyClusterNode: ofOwningCluster,
    CloudlyRuntimeNetworkProjection: ofOwningCluster,
    CloudlyRuntimeNetworkLeases: ofOwningCluster,
    // A write of only the cluster's bookkeeping (a relay token rotation) changes nothing read here.
    CloudlyCluster: ofOwningClusterInputs,
    // A version added or re-sealed: each cluster the group names, read when the key runs.
    CloudlySecretGroup: (changeArg) => [`${secretGroupKeyPrefix}${changeArg.id}`],
    // A new recipient: copies sealed to one the relay no longer holds leave the desired state.
    CloudlySecretRecipients: ofOwningCluster,
  };
  /** Every input reaches it through the feed; the start-up pass publishes what a restart left owed. */
  public readonly resync = false;

  constructor(private readonly ports: IDesiredStateControllerPorts) {
    this.writes = [clusterDesiredStateKind.collectionName, ports.routeTableKind];
  }

  public async all(): Promise<readonly string[]> {
    this.ports.forgetRemembered();
    return allClusterIds(this.ports.store);
  }

  public async reconcile(keyArg: string): Promise<IReconcileResult> {
    if (keyArg.startsWith(secretGroupKeyPrefix)) {
      const group = await this.ports.store.get(secretGroupKind, keyArg.slice(secretGroupKeyPrefix.length));
      let written = false;
      for (const clusterId of group?.clusterIds ?? []) {
        written = (await this.reconcile(clusterId)).outcome === 'written' || written;
      }
      return { outcome: written ? 'written' : 'kept' };
    }
    let clusterId = keyArg;
    if (keyArg.startsWith(serviceKeyPrefix)) {
      const service = await this.ports.store.get(serviceKind, keyArg.slice(serviceKeyPrefix.length));
      if (!service) {
        return { outcome: 'kept' };
      }
      clusterId = service.clusterId;
    }
    if (!(await this.ports.store.get(clusterKind, clusterId))) {
      return { outcome: 'kept' };
    }
    const { state, published } = await this.ports.publish(clusterId);
    if (published) {
      await this.ports.hint(clusterId, state);
    }
    return { outcome: published ? 'written' : 'kept' };
  }
}
