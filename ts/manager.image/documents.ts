import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import { imageVersionFormat, imageVersionNameOf, type IImageVersion } from '../interfaces/data/imageversion.js';

/** The image domain's one document: an image version Cloudly durably holds for a service. */

export interface IImageVersionDocument extends IStoredDocument {
  /** `<serviceId>/<digest>`: one version per digest and service, and a page of one service orders by digest. */
  serviceId: string;
  digest: string;
  byteLength: number;
  storedAt: number;
  blobKey: string;
  pushedByClusterId: string | null;
}

export const imageVersionKind = defineDocumentKind<IImageVersionDocument>('CloudlyImageVersion');

export const imageVersionId = (serviceIdArg: string, digestArg: string): string => `${serviceIdArg}/${digestArg}`;

/** Where an image version's tar stream lives in the blob store. */
export const imageVersionBlobKey = (serviceIdArg: string, digestArg: string): string => `images/${serviceIdArg}/${digestArg}`;

/** An image version as the API answers it: the blob key stays inside Cloudly. */
export const toPublicImageVersion = (docArg: IImageVersionDocument): IImageVersion => ({
  serviceId: docArg.serviceId,
  digest: docArg.digest,
  name: imageVersionNameOf(docArg.digest),
  format: imageVersionFormat,
  byteLength: docArg.byteLength,
  storedAt: docArg.storedAt,
  pushedByClusterId: docArg.pushedByClusterId,
});
