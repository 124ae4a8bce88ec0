import type { ITypedContract } from './admin.js';
import type { IIdentity } from '../data/user.js';
import type { IImageVersion } from '../data/imageversion.js';
import type { TVirtualStream } from './backup.js';
import type { IPageAnswer, IPageRequest } from './pagination.js';

/**
 * Image versions: a relay pushes a service's image as one tar stream and pulls it back onto the
 * nodes that run the service. Project's own contracts (the spec names `pushImageVersion` as the
 * model of a durable streamed receipt and shapes nothing else). The bytes travel on the relay's
 * socket exactly like database closures (docs/api/images.md).
 */

/**
 * The relay offers one image version of a service its cluster runs. `accepted` only permits
 * sending; the stream's completion receipt (`IImageVersionReceipt`) is what says Cloudly durably
 * holds the bytes. A version Cloudly already holds is answered `accepted: false` with the version:
 * nothing needs to be sent again.
 */
export type IReq_Relay_Cloudly_PushImageVersion = ITypedContract<
  'pushImageVersion',
  {
    serviceId: string;
    /** sha256 of the tar stream, 64 lowercase hex; the bytes must hash to it. */
    digest: string;
    /** Exact length of the tar stream. */
    byteLength: number;
    image: TVirtualStream<'send'>;
  },
  { accepted: boolean; imageVersion?: IImageVersion }
>;

/** What the sender of an image version receives when the stream completes: Cloudly holds exactly these bytes. */
export interface IImageVersionReceipt {
  serviceId: string;
  digest: string;
  byteLength: number;
  storedAt: number;
}

/** The relay of a cluster that runs the service fetches one held image version's bytes. */
export type IReq_Relay_Cloudly_PullImageVersion = ITypedContract<
  'pullImageVersion',
  { serviceId: string; digest: string },
  { imageVersion: IImageVersion; image: TVirtualStream<'receive'> }
>;

/** Lists the image versions Cloudly holds for one service, oldest first (by digest when paged). */
export type IReq_Admin_GetServiceImageVersions = ITypedContract<
  'getServiceImageVersions',
  { identity: IIdentity; serviceId: string } & IPageRequest,
  { imageVersions: IImageVersion[] } & IPageAnswer
>;
