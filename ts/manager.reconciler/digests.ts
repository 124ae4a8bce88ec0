import { createHash } from 'node:crypto';
import type { Document } from 'mongodb';
import type { IDigestResync } from '../core/controller.js';
import { documentKindNamed, type DocumentStore } from '../core/store.js';

/**
 * The input digests of a resync (docs/reconciler.md, "The resync"): for each controller that
 * resyncs from digests and each cluster, one hash of what stands for every document of its input
 * and written kinds that belongs to the cluster (id, incarnation, generation), together with the
 * documents of those kinds that belong to no cluster (an organization, the address plan). One
 * read per kind, whatever the fleet's size: the cost of a resync that finds nothing changed.
 */

export interface IDigestReader {
  name: string;
  /** Collection names of its `inputs` and `writes`. */
  kinds: readonly string[];
  digestResync: IDigestResync;
}

/** The service kind is always read: what names only its service belongs to that service's cluster. */
const serviceKindName = 'CloudlyService';

/** Larger than any kind's count here, so that a kind is one command, not a find and its getMores. */
const oneBatch = 1_000_000;

const hashOf = (partsArg: readonly string[]): string => {
  const hash = createHash('sha1');
  for (const part of partsArg) {
    hash.update(part);
    hash.update('\n');
  }
  return hash.digest('base64');
};

/** What stands for one document: its id, its incarnation (`_id`: a document removed and made again differs) and its generation or the kind's fields. */
const lineOf = (docArg: Document, fieldsArg: readonly string[] | undefined): string => {
  const version = fieldsArg
    ? JSON.stringify(fieldsArg.map((fieldArg) => docArg[fieldArg] ?? null))
    : String(docArg.inputsGeneration ?? docArg.generation ?? '');
  return `${String(docArg.id)}\t${String(docArg._id)}\t${version}`;
};

/**
 * Reads the digests of every reader: per reader, its key of each cluster → digest. A cluster's key
 * is there when any document of the reader's kinds belongs to it (the cluster itself, or what a
 * removed cluster left behind).
 */
export const readInputDigests = async (storeArg: DocumentStore, readersArg: readonly IDigestReader[]): Promise<Map<string, Map<string, string>>> => {
  // Kinds read with their fields: the same kind with other fields (another reader's) is read once per field set.
  const reads = new Map<string, { kind: string; fields: readonly string[] | undefined }>();
  const readKey = (kindArg: string, fieldsArg: readonly string[] | undefined) => `${kindArg}|${fieldsArg?.join(',') ?? ''}`;
  reads.set(readKey(serviceKindName, undefined), { kind: serviceKindName, fields: undefined });
  for (const reader of readersArg) {
    for (const kind of reader.kinds) {
      const fields = reader.digestResync.fields?.[kind];
      reads.set(readKey(kind, fields), { kind, fields });
    }
  }
  const docsOf = new Map<string, Document[]>();
  await Promise.all([...reads].map(async ([key, { kind, fields }]) => {
    const documentKind = documentKindNamed(kind);
    if (!documentKind) {
      throw new Error(`resync digest: no document kind named ${kind}`);
    }
    const projection: Record<string, 1> = { _id: 1, id: 1, clusterId: 1, serviceId: 1 };
    for (const field of fields ?? ['generation', 'inputsGeneration']) {
      projection[field] = 1;
    }
    docsOf.set(key, await storeArg.collection(documentKind).find({}, { projection, batchSize: oneBatch }).toArray());
  }));
  const clusterOfService = new Map<string, string>();
  for (const doc of docsOf.get(readKey(serviceKindName, undefined)) ?? []) {
    if (typeof doc.clusterId === 'string') {
      clusterOfService.set(String(doc.id), doc.clusterId);
    }
  }
  // Per read: each cluster's hash, and the hash of what belongs to no cluster.
  const hashed = new Map<string, { byCluster: Map<string, string>; unowned: string }>();
  for (const [key, { kind, fields }] of reads) {
    const documentKind = documentKindNamed(kind)!;
    const linesOf = new Map<string, string[]>();
    const unowned: string[] = [];
    for (const doc of docsOf.get(key) ?? []) {
      const owners = documentKind.owners(String(doc.id), doc);
      // A document of a service that is gone has no cluster to belong to: it counts for every cluster.
      const clusterId = owners.clusterId ?? (owners.serviceId === undefined ? undefined : clusterOfService.get(owners.serviceId));
      const line = lineOf(doc, fields);
      if (clusterId === undefined) {
        unowned.push(line);
      } else {
        const lines = linesOf.get(clusterId) ?? [];
        lines.push(line);
        linesOf.set(clusterId, lines);
      }
    }
    const byCluster = new Map<string, string>();
    for (const [clusterId, lines] of linesOf) {
      byCluster.set(clusterId, hashOf(lines.sort()));
    }
    hashed.set(key, { byCluster, unowned: hashOf(unowned.sort()) });
  }
  const digests = new Map<string, Map<string, string>>();
  for (const reader of readersArg) {
    const parts = [...new Set(reader.kinds)].sort().map((kindArg) => hashed.get(readKey(kindArg, reader.digestResync.fields?.[kindArg]))!);
    const unowned = hashOf(parts.map((partArg) => partArg.unowned));
    const clusters = new Set(parts.flatMap((partArg) => [...partArg.byCluster.keys()]));
    const byKey = new Map<string, string>();
    for (const clusterId of clusters) {
      byKey.set(reader.digestResync.keyOf(clusterId), hashOf([unowned, ...parts.map((partArg) => partArg.byCluster.get(clusterId) ?? '')]));
    }
    digests.set(reader.name, byKey);
  }
  return digests;
};
