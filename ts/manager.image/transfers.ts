import { refuse, refuseNamed } from '../core/errors.js';
import { fieldProblem, fieldProblemReasons, refuseFields } from '../core/validation.js';
import { BlobStoreError, blobStoreReason, type IBlobStore } from '../core/blobstore.js';
import { StreamAbortedError, streamChannelOf, type StreamReceiver, type StreamSender } from '../core/streams.js';
import type { DocumentStore } from '../core/store.js';
import type { TCloudlyLogger } from '../core/logger.js';
import type { IRelaySession } from '../core/relaysessions.js';
import type { IImageVersionReceipt } from '../interfaces/requests/image.js';
import type { TVirtualStream } from '../interfaces/requests/backup.js';
import { decideImageVersionRecord, imageRefusalReasons } from './decide.js';
import { imageVersionBlobKey, imageVersionId, imageVersionKind, type IImageVersionDocument } from './documents.js';

/**
 * The bytes of image versions on this instance: pushes from a relay into the blob store and pulls
 * from the blob store back to a relay, on the relay's own socket (ts/core/streams.ts). A push is
 * stored (exact length and sha256 proven, fsynced), then recorded, then made durable in the
 * database, and only then answered with its receipt; a push cut short, too long or hashing to
 * another digest leaves neither bytes nor a record.
 */

/** A blob store failure as a refusal before any byte moved. */
const blobRefusalOf = (errorArg: unknown): unknown =>
  (errorArg instanceof BlobStoreError ? refuse('unavailable', [blobStoreReason('image-version', errorArg.code)]) : errorArg);

/** What a stream failure is called on the wire: the blob store's code or the stream's reason. */
const abortReasonOf = (errorArg: unknown): string => {
  if (errorArg instanceof BlobStoreError) {
    return `image-version-${errorArg.code}`;
  }
  if (errorArg instanceof StreamAbortedError) {
    return errorArg.reason;
  }
  return 'image-version-store-failed';
};

export interface IImagePush {
  serviceId: string;
  digest: string;
  byteLength: number;
  streamId: string;
  clusterId: string;
}

export interface IImageTransferPorts {
  blobStore: IBlobStore;
  store: DocumentStore;
  logger: TCloudlyLogger;
  /** Makes the database's last writes durable (the embedded database writes its snapshot lazily). */
  flushSnapshot(): Promise<void>;
}

export class ImageTransfers {
  /** Pushes in flight on this instance, by blob key: one at a time per version. */
  private readonly pushesInFlight = new Set<string>();
  /** Background stream work, awaited on stop so no write is cut off mid-way. */
  private readonly streamTasks = new Set<Promise<void>>();

  constructor(private readonly ports: IImageTransferPorts) {}

  public async stop(): Promise<void> {
    await Promise.allSettled([...this.streamTasks]);
  }

  private track(taskArg: Promise<void>): void {
    this.streamTasks.add(taskArg);
    void taskArg.finally(() => this.streamTasks.delete(taskArg));
  }

  /**
   * Takes a push the relay announced: clears bytes an earlier attempt left without a record,
   * attaches the receiver (its first credit follows the answer) and stores the bytes in the background.
   */
  public async acceptPush(sessionArg: IRelaySession, pushArg: IImagePush): Promise<{ accepted: true }> {
    const blobKey = imageVersionBlobKey(pushArg.serviceId, pushArg.digest);
    if (this.pushesInFlight.has(blobKey)) {
      throw refuse('conflict', [imageRefusalReasons.pushInProgress]);
    }
    this.pushesInFlight.add(blobKey);
    // Bytes under the key without a record are an attempt that never committed. The record is read
    // again just before: another instance may have recorded the version since the caller looked, and
    // its bytes must stay (this push then ends `image-version-blob-exists`; a retry is answered held).
    try {
      const recorded = await this.ports.store.get(imageVersionKind, imageVersionId(pushArg.serviceId, pushArg.digest));
      if (!recorded && await this.ports.blobStore.stat(blobKey)) {
        await this.ports.blobStore.delete(blobKey);
      }
    } catch (error) {
      this.pushesInFlight.delete(blobKey);
      throw blobRefusalOf(error);
    }
    let receiver: StreamReceiver;
    try {
      receiver = streamChannelOf(sessionArg.peer).attachReceiver(pushArg.streamId, { firstCreditAfterAnswer: true });
    } catch (error) {
      this.pushesInFlight.delete(blobKey);
      throw error instanceof StreamAbortedError
        ? refuse('unavailable', [error.reason])
        : refuseFields([fieldProblem('request.image.streamId', fieldProblemReasons.duplicate, 'is already in use on this socket')]);
    }
    this.track(this.receivePush(receiver, blobKey, pushArg).finally(() => this.pushesInFlight.delete(blobKey)));
    return { accepted: true };
  }

  private async receivePush(receiverArg: StreamReceiver, blobKeyArg: string, pushArg: IImagePush): Promise<void> {
    try {
      const stored = await this.ports.blobStore.put(blobKeyArg, { byteLength: pushArg.byteLength, sha256: pushArg.digest }, receiverArg);
      const record: Omit<IImageVersionDocument, 'generation'> = {
        id: imageVersionId(pushArg.serviceId, pushArg.digest),
        serviceId: pushArg.serviceId,
        digest: pushArg.digest,
        byteLength: stored.byteLength,
        storedAt: stored.storedAt,
        blobKey: blobKeyArg,
        pushedByClusterId: pushArg.clusterId,
      };
      const { outcome, doc } = await this.ports.store.mutate(imageVersionKind, record.id, (currentArg) => decideImageVersionRecord(currentArg, record));
      // A version recorded meanwhile by another push names the same digest, so the same bytes: it is
      // what Cloudly holds, and the receipt says so.
      const held = outcome === 'created' ? record : doc;
      if (!held || held.digest !== pushArg.digest || held.byteLength !== stored.byteLength) {
        receiverArg.abort(imageRefusalReasons.recordFailed);
        return;
      }
      // The receipt says "durable": the embedded database's snapshot must hold the record first.
      await this.ports.flushSnapshot();
      const receipt: IImageVersionReceipt = {
        serviceId: pushArg.serviceId,
        digest: pushArg.digest,
        byteLength: held.byteLength,
        storedAt: held.storedAt,
      };
      receiverArg.complete(receipt);
      this.ports.logger.info({ serviceId: pushArg.serviceId, digest: pushArg.digest, byteLength: stored.byteLength }, 'image version stored');
    } catch (error) {
      if (!receiverArg.isSettled) {
        receiverArg.abort(abortReasonOf(error));
      }
      this.ports.logger.warn({ serviceId: pushArg.serviceId, digest: pushArg.digest, reason: abortReasonOf(error) }, 'image version push refused');
    }
  }

  /** Offers a held image version to a relay: the bytes must still match their record; they follow the answer. */
  public async offerPull(sessionArg: IRelaySession, versionArg: IImageVersionDocument): Promise<{ image: TVirtualStream<'receive'> }> {
    const stored = await this.ports.blobStore.stat(versionArg.blobKey).catch((error: unknown) => {
      throw blobRefusalOf(error);
    });
    if (!stored || stored.byteLength !== versionArg.byteLength || stored.sha256 !== versionArg.digest) {
      throw refuse('unavailable', [imageRefusalReasons.imageBytesMissing]);
    }
    const sender = streamChannelOf(sessionArg.peer).openSender();
    this.track(this.sendBlob(sender, versionArg.blobKey));
    return { image: sender.reference('receive') };
  }

  /** Streams a stored blob; bytes that no longer match their record end in an abort, never a clean end. */
  private async sendBlob(senderArg: StreamSender, blobKeyArg: string): Promise<void> {
    try {
      await senderArg.pipeFrom(this.ports.blobStore.read(blobKeyArg, { transientChunks: true }), abortReasonOf, { awaitReceipt: false });
    } catch (error) {
      if (!senderArg.isSettled) {
        senderArg.abort(abortReasonOf(error));
      }
    }
  }
}
