import { createHash } from 'node:crypto';
import { MongoServerError, ObjectId, type Collection, type Document, type Filter } from 'mongodb';
import type { TypedResponseError } from '@api.global/typedrequest';
import type { CloudlyDatabase } from './database.js';
import { refuse } from './errors.js';

/**
 * The one mechanism every manager uses to keep documents. Every document has an `id` and a
 * server-managed `generation`; a change commits by exactly one conditional single-document
 * write on the generation the caller read, so a lost race is a `null` the handler answers as
 * `conflict`, never a silent overwrite. An idempotent mutation stores its answer in that same
 * write, so a replay finds it.
 *
 * The documents live in the collections of the smartdata connection, but writes go through the
 * raw driver collection: smartdata's `save()` is last-write-wins and may re-create a deleted
 * document, which no racing mutation may use.
 */

export interface IStoredDocument {
  id: string;
  generation: number;
}

/** A kind of document: its collection name and its shape. */
export interface IDocumentKind<T extends IStoredDocument> {
  readonly collectionName: string;
  /**
   * Deprecated and without effect: every write of the embedded database is journaled before it
   * is answered, whatever its kind (docs/storage.md). Kept so existing kind definitions compile.
   */
  readonly snapshotOnWrite: boolean;
  /** Phantom member that carries the document type; never set. */
  readonly documentType?: T;
}

export const defineDocumentKind = <T extends IStoredDocument>(
  collectionNameArg: string,
  optionsArg: { snapshotOnWrite?: boolean } = {},
): IDocumentKind<T> => {
  if (!/^[A-Za-z][A-Za-z0-9_]{0,62}$/.test(collectionNameArg)) {
    throw new Error(`invalid collection name ${collectionNameArg}`);
  }
  return Object.freeze({ collectionName: collectionNameArg, snapshotOnWrite: optionsArg.snapshotOnWrite ?? true });
};

/** How often `update` and `mutate` read again after losing a race before they give up. */
export const defaultUpdateRounds = 8;

/**
 * What a `mutate` decider wants done with the document it was shown (null when there is none):
 * swap a change onto the generation it read, create it (only when nothing was read), remove it,
 * keep it as it is (no write), or refuse the whole operation with a refusal the caller receives.
 */
export type TDecision<T extends IStoredDocument> =
  | { kind: 'write'; change: ISwapChange<T> }
  | { kind: 'create'; doc: Omit<T, 'generation'> }
  | { kind: 'remove' }
  | { kind: 'keep' }
  | { kind: 'refuse'; refusal: TypedResponseError };

/** How a `mutate` ended; `doc` is the document as it stands afterwards (null once removed or never there). */
export interface IMutateResult<T extends IStoredDocument> {
  outcome: 'written' | 'created' | 'removed' | 'kept';
  doc: T | null;
  /** The generation the decision was made on (0 when there was no document). */
  previousGeneration: number;
}

/** How many recent mutation answers a document keeps for replays. */
export const retainedMutationAnswers = 64;

interface IMutationRecord {
  mutationId: string;
  answer: unknown;
}

export interface ISwapChange<T> {
  set?: Partial<Omit<T, 'id' | 'generation'>>;
  unset?: Array<Exclude<keyof T, 'id' | 'generation'>>;
}

export interface IMutationAnswer {
  mutationId: string;
  answer: unknown;
}

type TStoredShape = Document & { _id: ObjectId; mutations?: IMutationRecord[] };

const hiddenFields = { _id: 0, mutations: 0 } as const;

/** `_id` derived from the collection and the id, so one id can only ever be inserted once. */
const documentObjectId = (collectionNameArg: string, idArg: string): ObjectId =>
  new ObjectId(createHash('sha256').update(`${collectionNameArg}\u0000${idArg}`).digest().subarray(0, 12));

const isDuplicateKeyError = (errorArg: unknown): boolean =>
  errorArg instanceof MongoServerError && errorArg.code === 11000;

const stripStoredFields = <T>(docArg: Document | null): T | null => {
  if (!docArg) {
    return null;
  }
  const { _id: _ignoredId, mutations: _ignoredMutations, ...rest } = docArg;
  return rest as T;
};

export class DocumentStore {
  /** Counts committed writes; `/metrics` and the benchmark read it. */
  public committedWrites = 0;

  constructor(private readonly database: CloudlyDatabase) {}

  public collection<T extends IStoredDocument>(kindArg: IDocumentKind<T>): Collection<TStoredShape> {
    return this.database.mongoDb.collection<TStoredShape>(kindArg.collectionName);
  }

  private committed(_kindArg: IDocumentKind<IStoredDocument>): void {
    this.committedWrites++;
  }

  /**
   * Creates a document at generation 1 exactly once per id: concurrent inserts of one id have
   * exactly one winner. Returns the stored document, or null when the id already exists.
   */
  public async insert<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    docArg: Omit<T, 'generation'> & { generation?: number },
    optionsArg: { mutation?: IMutationAnswer } = {},
  ): Promise<T | null> {
    const doc = { ...docArg, generation: 1 } as Document;
    if (optionsArg.mutation) {
      doc.mutations = [{ mutationId: optionsArg.mutation.mutationId, answer: optionsArg.mutation.answer }];
    }
    try {
      const result = await this.collection(kindArg).updateOne(
        { _id: documentObjectId(kindArg.collectionName, docArg.id) },
        { $setOnInsert: doc },
        { upsert: true },
      );
      if (result.upsertedCount !== 1) {
        return null;
      }
    } catch (error) {
      if (isDuplicateKeyError(error)) {
        return null;
      }
      throw error;
    }
    this.committed(kindArg);
    return stripStoredFields<T>(doc);
  }

  public async get<T extends IStoredDocument>(kindArg: IDocumentKind<T>, idArg: string): Promise<T | null> {
    return this.findOne(kindArg, { id: idArg } as Filter<T>);
  }

  public async findOne<T extends IStoredDocument>(kindArg: IDocumentKind<T>, filterArg: Filter<T>): Promise<T | null> {
    const doc = await this.collection(kindArg).findOne(filterArg as Filter<TStoredShape>, { projection: hiddenFields });
    return stripStoredFields<T>(doc);
  }

  public async find<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    filterArg: Filter<T> = {},
    optionsArg: { sort?: Record<string, 1 | -1>; limit?: number } = {},
  ): Promise<T[]> {
    let cursor = this.collection(kindArg).find(filterArg as Filter<TStoredShape>, { projection: hiddenFields });
    if (optionsArg.sort) {
      cursor = cursor.sort(optionsArg.sort);
    }
    if (optionsArg.limit) {
      cursor = cursor.limit(optionsArg.limit);
    }
    const docs = await cursor.toArray();
    return docs.map((doc) => stripStoredFields<T>(doc) as T);
  }

  /**
   * The compare-and-swap: applies the change only if the document still has `expectedGeneration`,
   * and bumps the generation in the same write. Returns the new document, or null when the
   * document is gone or another writer got there first.
   */
  public async swap<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    idArg: string,
    expectedGenerationArg: number,
    changeArg: ISwapChange<T>,
    optionsArg: { mutation?: IMutationAnswer } = {},
  ): Promise<T | null> {
    const collection = this.collection(kindArg);
    const filter = { id: idArg, generation: expectedGenerationArg } as Filter<TStoredShape>;
    const set: Document = { ...(changeArg.set ?? {}), generation: expectedGenerationArg + 1 };
    if (optionsArg.mutation) {
      // The answers ride in the committing write itself; the read below only carries the older
      // answers forward, and the generation filter still decides the race.
      const current = await collection.findOne(filter, { projection: { mutations: 1 } });
      if (!current) {
        return null;
      }
      const kept = (current.mutations ?? []).slice(-(retainedMutationAnswers - 1));
      set.mutations = [...kept, { mutationId: optionsArg.mutation.mutationId, answer: optionsArg.mutation.answer }];
    }
    const update: Document = { $set: set };
    if (changeArg.unset && changeArg.unset.length > 0) {
      update.$unset = Object.fromEntries(changeArg.unset.map((key) => [key as string, '']));
    }
    const after = await collection.findOneAndUpdate(filter, update, { returnDocument: 'after' });
    if (!after) {
      return null;
    }
    this.committed(kindArg);
    return stripStoredFields<T>(after);
  }

  /**
   * Read, decide, swap, until the change lands: reads the document, asks `changeOfArg` for the
   * change against what it read (null declines), and swaps on that generation; a lost race reads
   * and decides again, at most `roundsArg` times. Returns the new document, or null when the
   * document is gone, the change was declined, or every round was lost.
   */
  public async update<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    idArg: string,
    changeOfArg: (currentArg: T) => ISwapChange<T> | null,
    roundsArg = defaultUpdateRounds,
  ): Promise<T | null> {
    for (let round = 0; round < roundsArg; round++) {
      const current = await this.get(kindArg, idArg);
      const change = current ? changeOfArg(current) : null;
      if (!current || !change) {
        return null;
      }
      const next = await this.swap(kindArg, idArg, current.generation, change);
      if (next) {
        return next;
      }
    }
    return null;
  }

  /**
   * The one read-decide-write primitive (Kubernetes' GuaranteedUpdate): reads the document, asks
   * `decideArg` what to do with it, and commits that decision with one conditional write on the
   * generation it read. A lost race reads and decides again, at most `rounds` times; then the
   * operation is refused `conflict`. A `refuse` decision is thrown as it is. Never answers an
   * ambiguous null: the outcome says what happened.
   */
  public async mutate<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    idArg: string,
    decideArg: (currentArg: T | null) => TDecision<T> | Promise<TDecision<T>>,
    optionsArg: { rounds?: number; mutation?: IMutationAnswer } = {},
  ): Promise<IMutateResult<T>> {
    const rounds = optionsArg.rounds ?? defaultUpdateRounds;
    for (let round = 0; round < rounds; round++) {
      const current = await this.get(kindArg, idArg);
      const decision = await decideArg(current);
      const previousGeneration = current?.generation ?? 0;
      switch (decision.kind) {
        case 'refuse':
          throw decision.refusal;
        case 'keep':
          return { outcome: 'kept', doc: current, previousGeneration };
        case 'create': {
          if (current) {
            throw new Error(`mutate of ${kindArg.collectionName} ${idArg}: create decided on an existing document`);
          }
          if ((decision.doc as { id: string }).id !== idArg) {
            throw new Error(`mutate of ${kindArg.collectionName} ${idArg}: create decided a document with another id`);
          }
          const created = await this.insert(kindArg, decision.doc, { mutation: optionsArg.mutation });
          if (created) {
            return { outcome: 'created', doc: created, previousGeneration };
          }
          break;
        }
        case 'write': {
          if (!current) {
            throw new Error(`mutate of ${kindArg.collectionName} ${idArg}: write decided on no document`);
          }
          const written = await this.swap(kindArg, idArg, current.generation, decision.change, { mutation: optionsArg.mutation });
          if (written) {
            return { outcome: 'written', doc: written, previousGeneration };
          }
          break;
        }
        case 'remove': {
          if (!current) {
            return { outcome: 'kept', doc: null, previousGeneration };
          }
          if (await this.remove(kindArg, idArg, current.generation)) {
            return { outcome: 'removed', doc: null, previousGeneration };
          }
          break;
        }
      }
    }
    throw refuse('conflict', [`${kindArg.collectionName} ${idArg} kept changing during ${rounds} attempts; try again`]);
  }

  /** Deletes the document if it still has `expectedGeneration`; false when the race was lost. */
  public async remove<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    idArg: string,
    expectedGenerationArg: number,
  ): Promise<boolean> {
    const result = await this.collection(kindArg).deleteOne({ id: idArg, generation: expectedGenerationArg } as Filter<TStoredShape>);
    if (result.deletedCount === 1) {
      this.committed(kindArg);
      return true;
    }
    return false;
  }

  /** The stored answer of an earlier mutation, and the document that holds it. */
  public async findMutation<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    mutationIdArg: string,
  ): Promise<{ doc: T; answer: unknown } | null> {
    const doc = await this.collection(kindArg).findOne({ 'mutations.mutationId': mutationIdArg } as Filter<TStoredShape>);
    if (!doc) {
      return null;
    }
    const record = (doc.mutations ?? []).find((mutation) => mutation.mutationId === mutationIdArg);
    return record ? { doc: stripStoredFields<T>(doc) as T, answer: record.answer } : null;
  }
}
