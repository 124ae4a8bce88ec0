import type { IClusterPlatformDesiredService } from '../interfaces/data/desiredstate.js';
import { canonicalizeJson, type TKnownCanonicalTexts } from '../interfaces/private/canonicaljson.js';

/**
 * Each service's entry of its cluster's desired state, kept between computations while what it
 * is built from stays the same: the service's document (its incarnation and generation) and the
 * entry's other inputs (its bindings, the generations of the secret groups and recipients its
 * secrets resolved against). A change of one service then builds one entry and writes one entry's
 * canonical text, not a hundred; the rest are read as ids and generations only.
 *
 * Entries are frozen: the content answered to a relay and the digest share them. The memo is
 * forgotten at every full pass of the desired-state controller (a write made around Cloudly that
 * left a generation as it was is then seen), and a cluster's entries are replaced by those of its
 * latest computation, so a removed service's entry goes with the next one.
 */

export interface IRememberedServiceEntry {
  /** `<incarnation>:<generation>` of the document the entry was built from. */
  document: string;
  /** The entry's other inputs, as one string (see `entryInputsKey`). */
  inputs: string;
  createdAt: number;
  /** The secret groups the service names (the entry's secrets resolve against them). */
  secretIds: readonly string[];
  entry: IClusterPlatformDesiredService;
}

/** The secret groups a service's secrets name, each once, in order. */
export const serviceSecretIdsOf = (docArg: { secrets?: Readonly<Record<string, { secretId: string }>> }): string[] =>
  [...new Set(Object.values(docArg.secrets ?? {}).map((referenceArg) => referenceArg.secretId))].sort();

/** The key of a stored document, or null for one without an incarnation (never remembered). */
export const documentKeyOf = (docArg: { generation: number; _incarnation?: unknown }): string | null =>
  (typeof docArg._incarnation === 'string' ? `${docArg._incarnation}:${docArg.generation}` : null);

/** An entry's inputs beside its document: its bindings as listed, and each secret group's and the recipients' generation. */
export const entryInputsKey = (
  bindingsArg: IClusterPlatformDesiredService['platformBindings'],
  secretIdsArg: readonly string[],
  groupGenerationArg: (idArg: string) => number | null,
  recipientsGenerationArg: number | null,
): string => JSON.stringify([
  bindingsArg,
  secretIdsArg.map((idArg) => [idArg, groupGenerationArg(idArg)]),
  secretIdsArg.length > 0 ? recipientsGenerationArg : null,
]);

const deepFreeze = <T>(valueArg: T): T => {
  if (valueArg !== null && typeof valueArg === 'object' && !Object.isFrozen(valueArg)) {
    for (const item of Object.values(valueArg as object)) {
      deepFreeze(item);
    }
    Object.freeze(valueArg);
  }
  return valueArg;
};

export class DesiredServiceEntries {
  /** By cluster, by service id. */
  private readonly clusters = new Map<string, Map<string, IRememberedServiceEntry>>();
  /** The canonical text of every remembered entry, for the digest. */
  public readonly texts: TKnownCanonicalTexts = new WeakMap();

  /**
   * The cluster's remembered entries as they stand now. A computation reads only this map: the
   * next computation's `replace` swaps in a new one and never changes it, so entries cannot go
   * missing from under a computation that another one, started earlier or later, finished first.
   */
  public ofCluster(clusterIdArg: string): ReadonlyMap<string, IRememberedServiceEntry> {
    return this.clusters.get(clusterIdArg) ?? new Map();
  }

  /** Freezes a newly built entry and writes its canonical text once. */
  public remember(rememberedArg: IRememberedServiceEntry): IRememberedServiceEntry {
    deepFreeze(rememberedArg.entry);
    this.texts.set(rememberedArg.entry, canonicalizeJson(rememberedArg.entry));
    return Object.freeze(rememberedArg);
  }

  /** The cluster's entries as its latest computation found them (a service no longer there is forgotten). */
  public replace(clusterIdArg: string, entriesArg: Map<string, IRememberedServiceEntry>): void {
    if (entriesArg.size === 0) {
      this.clusters.delete(clusterIdArg);
    } else {
      this.clusters.set(clusterIdArg, entriesArg);
    }
  }

  public clear(): void {
    this.clusters.clear();
  }

}
