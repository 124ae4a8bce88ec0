import { createHash } from 'node:crypto';
import type { CloudlyRelayClient } from './relay.js';
import { StreamAbortedError, streamChannelOf, type StreamReceiver } from '../core/streams.js';
import type { ICorestoreDatabaseClosureDescriptor } from '../interfaces/data/corestoreclosure.js';
import type { IBackupArchiveObject } from '../interfaces/data/backup.js';
import type {
  IReq_Relay_Cloudly_BackupServiceDatabaseClosure,
  IReq_Relay_Cloudly_RestoreServiceDatabaseClosure,
  IServiceDatabaseClosureReceipt,
  TVirtualStream,
} from '../interfaces/requests/backup.js';

/**
 * The relay's side of the byte streams: what a relay does to send a database closure to
 * Cloudly, fetch one back, or take in an archive object Cloudly stages on its node. Each
 * one proves the exact length and sha256 it was promised before it counts as done.
 */

/** Reasons the relay side gives when it refuses incoming bytes. */
export const relayStreamAbortReasons = {
  tooLong: 'bytes-exceed-declared-length',
  tooShort: 'bytes-short-of-declared-length',
  sha256Mismatch: 'bytes-sha256-mismatch',
  notAccepted: 'closure-not-accepted',
  requestFailed: 'closure-request-failed',
} as const;

export interface ISentClosure {
  accepted: boolean;
  /** Cloudly's receipt that it durably holds the closure; present when accepted. */
  receipt?: IServiceDatabaseClosureReceipt;
}

/**
 * Offers a closure to Cloudly and, once accepted, streams the bytes. Resolves with Cloudly's
 * durable receipt; rejects with `StreamAbortedError` (with Cloudly's reason) when the bytes
 * were refused, or with the request's own refusal.
 */
export const sendServiceDatabaseClosure = async (
  relayArg: CloudlyRelayClient,
  requestArg: { backupId: string; serviceId: string; nodeId: string; descriptor: ICorestoreDatabaseClosureDescriptor },
  sourceArg: AsyncIterable<Uint8Array>,
): Promise<ISentClosure> => {
  const sender = streamChannelOf(relayArg.peer).openSender();
  let answer: IReq_Relay_Cloudly_BackupServiceDatabaseClosure['response'];
  try {
    answer = await relayArg.fire<IReq_Relay_Cloudly_BackupServiceDatabaseClosure>('backupServiceDatabaseClosure', {
      ...requestArg,
      closure: sender.reference('send'),
    });
  } catch (error) {
    sender.abort(relayStreamAbortReasons.requestFailed);
    throw error;
  }
  if (!answer.accepted) {
    sender.abort(relayStreamAbortReasons.notAccepted);
    return { accepted: false };
  }
  const receipt = await sender.pipeFrom(sourceArg);
  return { accepted: true, receipt: receipt as IServiceDatabaseClosureReceipt };
};

export interface IReceivedBytesOptions {
  /**
   * The consumer is done with each chunk before it asks for the next one (it hashes, copies or
   * writes it out at once), so each chunk's memory may be freed as soon as the next is asked
   * for (`StreamReceiver.release`); a freed chunk reads as empty. A consumer that keeps chunks
   * must not set this.
   */
  transientChunks?: boolean;
}

/**
 * Reads a stream and proves it carries exactly `byteLength` bytes hashing to `sha256`. The
 * iteration throws instead of finishing cleanly when they differ, and refuses the stream so
 * the sender learns why; on success it completes the stream with `{ byteLength, sha256 }`.
 */
export async function* verifiedStreamBytes(
  receiverArg: StreamReceiver,
  expectedArg: { byteLength: number; sha256: string },
  optionsArg: IReceivedBytesOptions = {},
): AsyncIterable<Buffer> {
  const hash = createHash('sha256');
  let length = 0;
  const iterator = receiverArg[Symbol.asyncIterator]();
  for (;;) {
    const next = await iterator.next();
    if (next.done) {
      break;
    }
    length += next.value.byteLength;
    if (length > expectedArg.byteLength) {
      receiverArg.abort(relayStreamAbortReasons.tooLong);
      throw new StreamAbortedError(relayStreamAbortReasons.tooLong, false);
    }
    hash.update(next.value);
    yield next.value;
    if (optionsArg.transientChunks) {
      receiverArg.release(next.value);
    }
  }
  if (length < expectedArg.byteLength) {
    receiverArg.abort(relayStreamAbortReasons.tooShort);
    throw new StreamAbortedError(relayStreamAbortReasons.tooShort, false);
  }
  if (hash.digest('hex') !== expectedArg.sha256) {
    receiverArg.abort(relayStreamAbortReasons.sha256Mismatch);
    throw new StreamAbortedError(relayStreamAbortReasons.sha256Mismatch, false);
  }
  receiverArg.complete({ byteLength: length, sha256: expectedArg.sha256 });
}

/** Fetches a closure back from Cloudly: the descriptor first, then its exact, verified bytes. */
export const fetchServiceDatabaseClosure = async (
  relayArg: CloudlyRelayClient,
  requestArg: { backupId: string; serviceId: string; nodeId: string },
  optionsArg: IReceivedBytesOptions = {},
): Promise<{ descriptor: ICorestoreDatabaseClosureDescriptor; bytes: AsyncIterable<Buffer> }> => {
  const answer = await relayArg.fire<IReq_Relay_Cloudly_RestoreServiceDatabaseClosure>('restoreServiceDatabaseClosure', requestArg);
  const receiver = streamChannelOf(relayArg.peer).attachReceiver(answer.closure.streamId);
  return { descriptor: answer.descriptor, bytes: verifiedStreamBytes(receiver, answer.descriptor, optionsArg) };
};

/** Takes in one staged archive object: exactly the manifest entry's size and sha256. */
export const receiveStagedArchiveObject = (
  relayArg: CloudlyRelayClient,
  archiveArg: TVirtualStream<'send'>,
  objectArg: IBackupArchiveObject,
  optionsArg: IReceivedBytesOptions = {},
): AsyncIterable<Buffer> => {
  const receiver = streamChannelOf(relayArg.peer).attachReceiver(archiveArg.streamId);
  return verifiedStreamBytes(receiver, { byteLength: objectArg.size, sha256: objectArg.sha256 }, optionsArg);
};
