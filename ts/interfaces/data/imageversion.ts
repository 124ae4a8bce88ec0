import type { TSha256Digest } from './immutableimage.js';

/**
 * Image versions Cloudly holds for a service. Project's own definition: the spec names
 * `pushImageVersion` only as the model of a durable streamed receipt, so the shapes here are ours.
 *
 * A service's `runtime.image` names either a registry image (any reference a runtime pulls from a
 * registry itself) or an image version pushed to Cloudly. The second is spelled
 * `cloudly:sha256:<64 lowercase hex>`: the digest is the sha256 of the image's tar stream. No
 * registry reference can be spelled like that (a reference has at most one `:` before its first
 * `/`, and then only for a host's port), so the two kinds never overlap and the runtime spec keeps
 * its one plain string member.
 */

/** The prefix of a pushed image version's name in `runtime.image`. */
export const imageVersionNamePrefix = 'cloudly:sha256:';

/** The format of a pushed image version's bytes: one tar stream (an OCI or Docker image archive). */
export const imageVersionFormat = 'image-tar-v1';

/** Project's own limits for pushed image versions. */
export const imageVersionLimits = Object.freeze({
  /** 64 GiB: larger than any image a node should pull through its relay. */
  maximumByteLength: 64 * 1024 * 1024 * 1024,
} as const);

/** What `runtime.image` names. */
export type TServiceImageName =
  | { kind: 'registry'; reference: string }
  | { kind: 'image-version'; digest: TSha256Digest };

/**
 * How a service's `runtime.image` is read. A name with the prefix but no well-formed digest after it
 * is still an image version (with no digest Cloudly could ever hold), so it is judged missing rather
 * than handed to a registry.
 */
export const parseServiceImageName = (imageArg: string): TServiceImageName => {
  if (!imageArg.startsWith(imageVersionNamePrefix)) {
    return { kind: 'registry', reference: imageArg };
  }
  return { kind: 'image-version', digest: imageArg.slice(imageVersionNamePrefix.length) };
};

/** The `runtime.image` name of a pushed image version. */
export const imageVersionNameOf = (digestArg: TSha256Digest): string => `${imageVersionNamePrefix}${digestArg}`;

/** One image version Cloudly durably holds for a service. */
export interface IImageVersion {
  serviceId: string;
  /** sha256 of the tar stream, 64 lowercase hex. */
  digest: TSha256Digest;
  /** What `runtime.image` says to run this version. */
  name: string;
  format: typeof imageVersionFormat;
  byteLength: number;
  /** Epoch milliseconds at which the bytes became durable. */
  storedAt: number;
  /** The cluster whose relay pushed it, or null when an administrator did. */
  pushedByClusterId: string | null;
}
