import { refuse } from '../core/errors.js';
import { adminQuery, relayOrchestration, relayQuery, type IDeclaredOperation } from '../core/operations.js';
import type { DocumentStore } from '../core/store.js';
import { validateStreamReference } from '../core/streams.js';
import { describedCheck, invalidField, isIdString, isIntegerIn, sentenceCheck, stringSchema, type TFieldCheck } from '../core/validation.js';
import { findPage, nextCursorMember, oldestFirst, orderedPageShape } from '../core/pagination.js';
import { isSha256Digest } from '../interfaces/data/immutableimage.js';
import { imageVersionLimits } from '../interfaces/data/imageversion.js';
import type { IService } from '../interfaces/data/service.js';
import { imageRefusalReasons, judgeRelayImageAccess } from './decide.js';
import { imageVersionId, imageVersionKind, toPublicImageVersion } from './documents.js';
import type { ImageTransfers } from './transfers.js';
import { sha256HexPattern } from '../interfaces/private/dataproperties.js';

/** The image domain's methods as declared operations (ts/core/operations.ts runs them). */

export interface IImageOperationPorts {
  store: DocumentStore;
  transfers: ImageTransfers;
  getService(serviceIdArg: string): Promise<IService | null>;
}

/** Versions oldest stored first, in the whole list and in its pages. */
const imageVersionsOrder = oldestFirst('storedAt');

const isImageDigest: TFieldCheck = describedCheck(stringSchema(64, 64, sha256HexPattern), (valueArg, pathArg) =>
  (isSha256Digest(valueArg) ? [] : [invalidField(pathArg, `must be 64 lowercase hex digits (the sha256 of the tar stream)`)]));

const isImageByteLength: TFieldCheck = isIntegerIn(1, imageVersionLimits.maximumByteLength);

export const imageOperations = (portsArg: IImageOperationPorts): IDeclaredOperation[] => {
  const { store, transfers } = portsArg;
  return [
    relayOrchestration({
      method: 'pushImageVersion',
      why: 'image bytes stream from the relay into the blob store, then the version is recorded',
      access: 'relay',
      // Everything is checked before the receiver attaches, so no byte moves for a bad request.
      input: {
        required: {
          serviceId: isIdString,
          digest: isImageDigest,
          byteLength: isImageByteLength,
          image: sentenceCheck((valueArg, pathArg) => validateStreamReference(valueArg, 'send', pathArg)),
        },
      },
      // Accepted now; the bytes are stored, then recorded, then receipted (./transfers.ts).
      async run(request, context) {
        const refusal = judgeRelayImageAccess(await portsArg.getService(request.serviceId), context.clusterId);
        if (refusal) {
          throw refusal;
        }
        const held = await store.get(imageVersionKind, imageVersionId(request.serviceId, request.digest));
        if (held) {
          // Held already (a retry whose receipt was lost): nothing needs to move again.
          return { accepted: false, imageVersion: toPublicImageVersion(held) };
        }
        return transfers.acceptPush(context.session, {
          serviceId: request.serviceId,
          digest: request.digest,
          byteLength: request.byteLength,
          streamId: request.image.streamId,
          clusterId: context.clusterId,
        });
      },
    }),

    relayQuery({
      method: 'pullImageVersion',
      access: 'relay',
      input: { required: { serviceId: isIdString, digest: isImageDigest } },
      async run(request, context) {
        const refusal = judgeRelayImageAccess(await portsArg.getService(request.serviceId), context.clusterId);
        if (refusal) {
          throw refusal;
        }
        const held = await store.get(imageVersionKind, imageVersionId(request.serviceId, request.digest));
        if (!held) {
          throw refuse('not-found', [imageRefusalReasons.imageVersionNotHeld]);
        }
        const { image } = await transfers.offerPull(context.session, held);
        return { imageVersion: toPublicImageVersion(held), image };
      },
    }),

    adminQuery({
      method: 'getServiceImageVersions',
      access: 'read',
      input: { required: { serviceId: isIdString }, optional: orderedPageShape('getServiceImageVersions', imageVersionsOrder) },
      async run(request) {
        if (!(await portsArg.getService(request.serviceId))) {
          throw refuse('not-found', [imageRefusalReasons.serviceNotFound]);
        }
        const page = await findPage(store, imageVersionKind, { serviceId: request.serviceId }, 'getServiceImageVersions', request, imageVersionsOrder);
        return { imageVersions: page.items.map(toPublicImageVersion), ...nextCursorMember(page) };
      },
    }),
  ];
};
