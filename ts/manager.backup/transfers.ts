import { refuse, refuseNamed } from '../core/errors.js';
import { fieldProblem, fieldProblemReasons, refuseFields } from '../core/validation.js';
import { BlobStoreError, blobStoreReason, type IBlobStore } from '../core/blobstore.js';
import {
  StreamAbortedError,
  streamChannelOf,
  type StreamReceiver,
  type StreamSender,
} from '../core/streams.js';
import type { DocumentStore } from '../core/store.js';
import type { TCloudlyLogger } from '../core/logger.js';
import type { IRelaySession } from '../core/relaysessions.js';
import { operationTiming, type IOperationRun, type IOperationTransferReport } from '../manager.operation/operation.manager.js';
import type { ICloudlyMethods } from '../interfaces/requests/methodmap.js';
import type { IServiceDatabaseClosureReceipt, TVirtualStream } from '../interfaces/requests/backup.js';
import { backupRefusalReasons, decideClosureRecord } from './decide.js';
import { closureBlobKey, serviceBackupKind, type IServiceBackupDocument } from './documents.js';

/**
 * The bytes of backups on this instance: closure uploads from a relay into the blob store, closure
 * downloads and archive staging from the blob store to a relay, and the operations that follow
 * them (progress, cancel). Every stream task is tracked, so stop waits until no write is cut off.
 */

type TClosureUpload = Omit<ICloudlyMethods['backupServiceDatabaseClosure']['request'], 'identity'>;

/** A blob store failure before any byte moved, as a refusal (e.g. `closure-blob-store-unavailable` while S3 is down). */
export const blobRefusalOf = (errorArg: unknown): unknown =>
  (errorArg instanceof BlobStoreError ? refuse('unavailable', [blobStoreReason('closure', errorArg.code)]) : errorArg);

/** What a stream failure is called on the wire: the blob store's code or the stream's reason. */
const abortReasonOf = (errorArg: unknown): string => {
  if (errorArg instanceof BlobStoreError) {
    return `closure-${errorArg.code}`;
  }
  if (errorArg instanceof StreamAbortedError) {
    return errorArg.reason;
  }
  return 'closure-store-failed';
};

/** The key of a restore's closure download, and of its operation: one backup onto one node. */
export const restoreStreamKey = (backupIdArg: string, nodeIdArg: string): string => `${backupIdArg}\u0000${nodeIdArg}`;
/** The key of an isolated restore's staging stream. */
export const stageStreamKey = (restoreIdArg: string): string => `stage\u0000${restoreIdArg}`;

export interface IClosureTransferPorts {
  blobStore: IBlobStore;
  store: DocumentStore;
  logger: TCloudlyLogger;
  /** Makes the database's last writes durable (the embedded database writes its snapshot lazily). */
  flushSnapshot(): Promise<void>;
  /** Where the bytes of an operation another instance runs are reported (OperationManager.reportRemoteTransfer). */
  reportRemoteTransfer(operationIdArg: string): IOperationTransferReport;
}

export class ClosureTransfers {
  /** Closure uploads in flight on this instance, by blob key: one at a time per backup. */
  private readonly uploadsInFlight = new Set<string>();
  /** Background stream work, awaited on stop so no write is cut off mid-way. */
  private readonly streamTasks = new Set<Promise<void>>();
  /** Running backup operations on this instance, by backup id: the closure upload reports bytes to it. */
  private readonly backupRuns = new Map<string, IOperationRun>();
  /** Running restore operations on this instance, by backup id and node: the closure download reports to it. */
  private readonly restoreRuns = new Map<string, IOperationRun>();
  /** Closure streams in flight, by backup id (upload), restore key (download) or stage key: a cancel aborts them. */
  private readonly openStreams = new Map<string, { abort(reasonArg: string): void; readonly isSettled: boolean }>();

  constructor(private readonly ports: IClosureTransferPorts) {}

  public async stop(): Promise<void> {
    await Promise.allSettled([...this.streamTasks]);
  }

  private track(taskArg: Promise<void>): void {
    this.streamTasks.add(taskArg);
    void taskArg.finally(() => this.streamTasks.delete(taskArg));
  }

  /** Aborts the stream of a cancelled operation, if one is open on this instance. */
  private abortStream(keyArg: string): void {
    const stream = this.openStreams.get(keyArg);
    if (stream && !stream.isSettled) {
      stream.abort(backupRefusalReasons.backupCancelled);
    }
  }

  /**
   * A backup operation of this instance: the closure upload reports its bytes to it and a cancel
   * aborts the upload. Answers the release, called when the operation's wait ends.
   */
  public followBackup(backupIdArg: string, runArg: IOperationRun): () => void {
    return this.follow(this.backupRuns, backupIdArg, runArg);
  }

  /** A restore operation of this instance, likewise for the closure download of one backup onto one node. */
  public followRestore(backupIdArg: string, nodeIdArg: string, runArg: IOperationRun): () => void {
    return this.follow(this.restoreRuns, restoreStreamKey(backupIdArg, nodeIdArg), runArg);
  }

  /** An isolated restore operation: a cancel aborts its staging stream. */
  public followStaging(restoreIdArg: string, runArg: IOperationRun): void {
    runArg.signal.addEventListener('abort', () => this.abortStream(stageStreamKey(restoreIdArg)), { once: true });
  }

  private follow(runsArg: Map<string, IOperationRun>, keyArg: string, runArg: IOperationRun): () => void {
    runsArg.set(keyArg, runArg);
    runArg.signal.addEventListener('abort', () => this.abortStream(keyArg), { once: true });
    return () => {
      if (runsArg.get(keyArg) === runArg) {
        runsArg.delete(keyArg);
      }
    };
  }

  /**
   * Takes a closure upload the relay announced for a backup that may receive it: clears bytes an
   * earlier attempt left without a record, attaches the receiver (its first credit follows the
   * answer) and stores the bytes in the background.
   */
  public async acceptClosure(sessionArg: IRelaySession, backupArg: IServiceBackupDocument, requestArg: TClosureUpload): Promise<{ accepted: true }> {
    const blobKey = closureBlobKey(backupArg.clusterId, backupArg.id);
    if (this.uploadsInFlight.has(blobKey)) {
      throw refuse('conflict', [backupRefusalReasons.closureUploadInProgress]);
    }
    this.uploadsInFlight.add(blobKey);
    // Bytes without a record on the backup are left over from an attempt that never
    // committed (e.g. a crash between fsync and the record): they are not the closure.
    try {
      if (await this.ports.blobStore.stat(blobKey)) {
        await this.ports.blobStore.delete(blobKey);
      }
    } catch (error) {
      this.uploadsInFlight.delete(blobKey);
      throw blobRefusalOf(error);
    }
    let receiver: StreamReceiver;
    try {
      // The first credit follows the `{ accepted: true }` answer, never precedes it.
      receiver = streamChannelOf(sessionArg.peer).attachReceiver(requestArg.closure.streamId, { firstCreditAfterAnswer: true });
    } catch (error) {
      this.uploadsInFlight.delete(blobKey);
      throw error instanceof StreamAbortedError
        ? refuse('unavailable', [error.reason])
        : refuseFields([fieldProblem('request.closure.streamId', fieldProblemReasons.duplicate, 'is already in use on this socket')]);
    }
    this.track(this.receiveClosure(receiver, blobKey, requestArg, backupArg.operationId).finally(() => this.uploadsInFlight.delete(blobKey)));
    return { accepted: true };
  }

  /** Stores the streamed closure, records it, and only then answers the stream with the receipt. */
  private async receiveClosure(receiverArg: StreamReceiver, blobKeyArg: string, requestArg: TClosureUpload, operationIdArg: string | undefined): Promise<void> {
    const { descriptor } = requestArg;
    // The backup may run on another instance (it was ordered there and its relay call forwarded
    // here): its bytes are then reported through the progress document, where its runner reads them.
    const localRun = this.backupRuns.get(requestArg.backupId);
    const remote = !localRun && operationIdArg !== undefined ? this.ports.reportRemoteTransfer(operationIdArg) : null;
    const run: Pick<IOperationRun, 'setPhase' | 'setBytes'> | null = localRun ?? remote;
    run?.setPhase('transfer', descriptor.byteLength);
    this.openStreams.set(requestArg.backupId, receiverArg);
    // Progress follows the bytes: the operation manager writes it at most every progressWriteMs.
    const progressTimer = run ? setInterval(() => run.setBytes(receiverArg.bytesReceived), operationTiming.progressWriteMs / 2) : null;
    try {
      const stored = await this.ports.blobStore.put(blobKeyArg, { byteLength: descriptor.byteLength, sha256: descriptor.sha256 }, receiverArg);
      run?.setBytes(stored.byteLength);
      // The relay answers its backup call after the receipt: the bytes are written before it.
      await remote?.flush();
      // Recorded on the backup unless it is gone or already has one.
      const { outcome } = await this.ports.store.mutate(serviceBackupKind, requestArg.backupId, (currentArg) =>
        decideClosureRecord(currentArg, { descriptor, storedAt: stored.storedAt, blobKey: blobKeyArg }));
      if (outcome !== 'written') {
        await this.ports.blobStore.delete(blobKeyArg);
        receiverArg.abort(backupRefusalReasons.closureRecordFailed);
        return;
      }
      // The embedded database writes its snapshot lazily; the receipt waits until it is on disk.
      await this.ports.flushSnapshot();
      const receipt: IServiceDatabaseClosureReceipt = {
        backupId: requestArg.backupId,
        serviceId: requestArg.serviceId,
        nodeId: requestArg.nodeId,
        byteLength: stored.byteLength,
        sha256: stored.sha256,
        storedAt: stored.storedAt,
      };
      receiverArg.complete(receipt);
      this.ports.logger.info({ backupId: requestArg.backupId, byteLength: stored.byteLength }, 'service database closure stored');
    } catch (error) {
      if (!receiverArg.isSettled) {
        receiverArg.abort(abortReasonOf(error));
      }
      this.ports.logger.warn({ backupId: requestArg.backupId, reason: abortReasonOf(error) }, 'service database closure refused');
    } finally {
      if (progressTimer) clearInterval(progressTimer);
      if (this.openStreams.get(requestArg.backupId) === receiverArg) {
        this.openStreams.delete(requestArg.backupId);
      }
    }
  }

  /**
   * Offers a backup's stored closure to the relay restoring it onto a node: the bytes must still
   * match their record; they follow the answer on a stream the relay receives.
   */
  public async offerClosure(
    sessionArg: IRelaySession,
    backupArg: IServiceBackupDocument,
    nodeIdArg: string,
  ): Promise<ICloudlyMethods['restoreServiceDatabaseClosure']['response']> {
    const closure = backupArg.closure!;
    const stored = await this.ports.blobStore.stat(closure.blobKey).catch((error: unknown) => {
      throw blobRefusalOf(error);
    });
    if (!stored || stored.byteLength !== closure.descriptor.byteLength || stored.sha256 !== closure.descriptor.sha256) {
      throw refuse('unavailable', [backupRefusalReasons.closureBytesMissing]);
    }
    const sender = streamChannelOf(sessionArg.peer).openSender();
    // A restore operation of this instance follows the bytes sent.
    const key = restoreStreamKey(backupArg.id, nodeIdArg);
    const run = this.restoreRuns.get(key);
    run?.setPhase('transfer', closure.descriptor.byteLength);
    if (run) {
      this.openStreams.set(key, sender);
    }
    this.track(this.sendBlob(sender, closure.blobKey, run).finally(() => {
      if (this.openStreams.get(key) === sender) {
        this.openStreams.delete(key);
      }
    }));
    return { descriptor: closure.descriptor, closure: sender.reference('receive') };
  }

  /**
   * Sends one stored blob to a relay on `sessionArg` for a call that names the stream (an
   * isolated restore's staging): `callArg` makes the call with the stream's reference; the
   * stream is aborted if the call ends before it, and its sending is awaited either way.
   */
  public async stageBlob<T>(
    sessionArg: IRelaySession,
    restoreIdArg: string,
    blobKeyArg: string,
    runArg: IOperationRun | undefined,
    callArg: (archiveArg: TVirtualStream<'send'>) => Promise<T>,
  ): Promise<T> {
    const sender = streamChannelOf(sessionArg.peer).openSender();
    const streamKey = stageStreamKey(restoreIdArg);
    this.openStreams.set(streamKey, sender);
    const sending = this.sendBlob(sender, blobKeyArg, runArg).finally(() => {
      if (this.openStreams.get(streamKey) === sender) {
        this.openStreams.delete(streamKey);
      }
    });
    this.track(sending);
    try {
      return await callArg(sender.reference('send'));
    } finally {
      if (!sender.isSettled) {
        sender.abort('stage-call-ended');
      }
      await sending;
    }
  }

  /**
   * Streams a stored blob; bytes that no longer match their record end in an abort, never a clean
   * end. The stream is done once its end is sent: the relay proves length and sha256 itself, and
   * its `complete` (or its abort after the end) is not waited for.
   */
  private async sendBlob(senderArg: StreamSender, blobKeyArg: string, runArg?: IOperationRun): Promise<void> {
    const progressTimer = runArg ? setInterval(() => runArg.setBytes(senderArg.bytesSent), operationTiming.progressWriteMs / 2) : null;
    try {
      // The sender copies each chunk into its frame before it asks for the next one.
      await senderArg.pipeFrom(this.ports.blobStore.read(blobKeyArg, { transientChunks: true }), abortReasonOf, { awaitReceipt: false });
    } catch (error) {
      if (!senderArg.isSettled) {
        senderArg.abort(abortReasonOf(error));
      }
    } finally {
      if (progressTimer) clearInterval(progressTimer);
      runArg?.setBytes(senderArg.bytesSent);
    }
  }
}
