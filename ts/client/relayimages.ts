import type { CloudlyRelayClient } from './relay.js';
import { streamChannelOf } from '../core/streams.js';
import { relayStreamAbortReasons, verifiedStreamBytes, type IReceivedBytesOptions } from './relayclosures.js';
import type { IImageVersion } from '../interfaces/data/imageversion.js';
import type {
  IImageVersionReceipt,
  IReq_Relay_Cloudly_PullImageVersion,
  IReq_Relay_Cloudly_PushImageVersion,
} from '../interfaces/requests/image.js';

/**
 * The relay's side of image versions (docs/api/images.md): push a service's image as one tar stream
 * with its digest, and pull a held version back with its exact bytes proven.
 */

export type TPushedImageVersion =
  /** Cloudly stored the bytes; the receipt says exactly what it durably holds. */
  | { outcome: 'stored'; receipt: IImageVersionReceipt }
  /** Cloudly held the version already; no byte was sent. */
  | { outcome: 'held'; imageVersion: IImageVersion };

/**
 * Offers an image version and, once accepted, streams the bytes. Resolves with Cloudly's durable
 * receipt (or the version it already held); rejects with `StreamAbortedError` (with Cloudly's
 * reason) when the bytes were refused, or with the request's own refusal.
 */
export const pushImageVersion = async (
  relayArg: CloudlyRelayClient,
  requestArg: { serviceId: string; digest: string; byteLength: number },
  sourceArg: AsyncIterable<Uint8Array>,
): Promise<TPushedImageVersion> => {
  const sender = streamChannelOf(relayArg.peer).openSender();
  let answer: IReq_Relay_Cloudly_PushImageVersion['response'];
  try {
    answer = await relayArg.fire<IReq_Relay_Cloudly_PushImageVersion>('pushImageVersion', { ...requestArg, image: sender.reference('send') });
  } catch (error) {
    sender.abort(relayStreamAbortReasons.requestFailed);
    throw error;
  }
  if (!answer.accepted) {
    sender.abort(relayStreamAbortReasons.notAccepted);
    if (!answer.imageVersion) {
      throw new Error('pushImageVersion answered neither accepted nor a held version');
    }
    return { outcome: 'held', imageVersion: answer.imageVersion };
  }
  const receipt = await sender.pipeFrom(sourceArg);
  return { outcome: 'stored', receipt: receipt as IImageVersionReceipt };
};

/** Pulls a held image version: its record first, then its exact, verified bytes. */
export const pullImageVersion = async (
  relayArg: CloudlyRelayClient,
  requestArg: { serviceId: string; digest: string },
  optionsArg: IReceivedBytesOptions = {},
): Promise<{ imageVersion: IImageVersion; bytes: AsyncIterable<Buffer> }> => {
  const answer = await relayArg.fire<IReq_Relay_Cloudly_PullImageVersion>('pullImageVersion', requestArg);
  const receiver = streamChannelOf(relayArg.peer).attachReceiver(answer.image.streamId);
  return {
    imageVersion: answer.imageVersion,
    bytes: verifiedStreamBytes(receiver, { byteLength: answer.imageVersion.byteLength, sha256: answer.imageVersion.digest }, optionsArg),
  };
};
