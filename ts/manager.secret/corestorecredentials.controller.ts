import { ofOwningCluster, ofOwningClusterInputs, type IController, type IReconcileResult } from '../core/controller.js';
import type { DocumentStore } from '../core/store.js';
import type { ICommittedChange } from '../core/changefeed.js';
import { allClusterIds } from '../manager.cluster/documents.js';
import { clusterNodeKind } from '../manager.cluster/clusternodes.js';
import { corestoreCredentialKind } from './documents.js';

export interface ICorestoreCredentialsPorts {
  store: DocumentStore;
  /** Makes the node's credential at version 1 unless one exists (one conditional write). */
  ensure: (clusterIdArg: string, nodeIdArg: string) => Promise<unknown>;
}

/**
 * The Corestore credentials controller: every node of a cluster has its Corestore control
 * credential (version 1) before anyone asks for it; the desired state names it and the relay
 * fetches it sealed. Rotations are administrators' writes; this controller only makes what is
 * missing. Keys are cluster ids.
 */
export class CorestoreCredentialsController implements IController {
  public readonly name = 'corestore-credentials';
  public readonly writes = [corestoreCredentialKind.collectionName] as const;
  public readonly inputs = {
    // A write of only the cluster's bookkeeping (a relay token rotation) changes nothing read here.
    CloudlyCluster: ofOwningClusterInputs,
    CloudlyClusterNode: ofOwningCluster,
    // A credential removed around Cloudly is made again.
    CloudlyCorestoreCredential: ofOwningCluster,
  };
  /** Nothing here changes with time: the resync runs the clusters whose digest moved. */
  public readonly digestResync = { keyOf: (clusterIdArg: string) => clusterIdArg };

  constructor(private readonly ports: ICorestoreCredentialsPorts) {}

  public async all(): Promise<readonly string[]> {
    return allClusterIds(this.ports.store);
  }

  public async reconcile(clusterIdArg: string): Promise<IReconcileResult> {
    const { store } = this.ports;
    const [nodes, credentials] = await Promise.all([
      store.find(clusterNodeKind, { clusterId: clusterIdArg }),
      store.find(corestoreCredentialKind, { clusterId: clusterIdArg }),
    ]);
    const made = new Set(credentials.map((doc) => doc.nodeId));
    let created = 0;
    for (const node of nodes) {
      if (!made.has(node.nodeId)) {
        await this.ports.ensure(clusterIdArg, node.nodeId);
        created++;
      }
    }
    return { outcome: created > 0 ? 'created' : 'kept' };
  }
}
