import { isPositiveCounter } from '../private/dataproperties.js';
import { readExactDataRecordOrNull, readOwnDataValue } from '../private/ownproperties.js';

/**
 * Protocol offers and refusals shared by every hop of a TypedRequest conversation between
 * serve.zone peers. Project's own definitions: the contract names `IProtocolOffer`,
 * `IProtocolRefusal`, `readProtocolOffer` and `readProtocolRefusal` without spelling them out.
 *
 * A peer offers one protocol name and the inclusive range of its versions it speaks. Two peers
 * can talk when the names are equal and the ranges overlap; they then use the highest common
 * version. A peer that cannot serve an offer answers an `IProtocolRefusal` that carries its own
 * offer, so the other side learns what it would have to speak.
 */
export interface IProtocolOffer {
  /** The protocol family, e.g. `serve.zone/cluster-ingress`. */
  name: string;
  minimumVersion: number;
  maximumVersion: number;
}

export const protocolRefusalReasons = Object.freeze([
  /** The peer's offer is missing or is not an offer. */
  'offer-invalid',
  /** The peer speaks another protocol family. */
  'protocol-mismatch',
  /** Same family, but the version ranges do not overlap. */
  'version-unsupported',
] as const);

export type TProtocolRefusalReason = typeof protocolRefusalReasons[number];

export const protocolContract = Object.freeze({
  refusalCode: 'protocol-refused',
  /** Versions are small positive integers; this bounds what a peer may claim. */
  maximumVersion: 1_000_000,
} as const);

/** The refusal a peer answers (as `TypedResponseError.errorData`) when it cannot serve an offer. */
export interface IProtocolRefusal {
  code: 'protocol-refused';
  reason: TProtocolRefusalReason;
  /** The refusing side's own offer. */
  supported: IProtocolOffer;
}

/** A lowercase family name with an optional `/` part, e.g. `serve.zone/cluster-ingress`. */
const isProtocolName = (valueArg: unknown): valueArg is string =>
  typeof valueArg === 'string' && /^[a-z0-9][a-z0-9.-]{0,63}(\/[a-z0-9][a-z0-9.-]{0,63})?$/.test(valueArg);

const isVersion = (valueArg: unknown): valueArg is number =>
  isPositiveCounter(valueArg) && valueArg <= protocolContract.maximumVersion;

/** Names every reason a value is not a protocol offer. Never throws. */
export const validateProtocolOffer = (valueArg: unknown, pathArg = 'protocol offer'): string[] => {
  const offer = readExactDataRecordOrNull(valueArg, ['name', 'minimumVersion', 'maximumVersion']);
  if (offer === null) {
    return [`${pathArg} must be a record of exactly name, minimumVersion and maximumVersion`];
  }
  const reasons: string[] = [];
  const name = readOwnDataValue(offer, 'name');
  const minimumVersion = readOwnDataValue(offer, 'minimumVersion');
  const maximumVersion = readOwnDataValue(offer, 'maximumVersion');
  if (!isProtocolName(name)) {
    reasons.push(`${pathArg}.name must be a protocol name such as serve.zone/cluster-ingress`);
  }
  if (!isVersion(minimumVersion)) {
    reasons.push(`${pathArg}.minimumVersion must be an integer from 1 to ${protocolContract.maximumVersion}`);
  }
  if (!isVersion(maximumVersion)) {
    reasons.push(`${pathArg}.maximumVersion must be an integer from 1 to ${protocolContract.maximumVersion}`);
  }
  if (isVersion(minimumVersion) && isVersion(maximumVersion) && minimumVersion > maximumVersion) {
    reasons.push(`${pathArg}.minimumVersion must not exceed ${pathArg}.maximumVersion`);
  }
  return reasons;
};

/**
 * The offer in a value that crossed a wire, as a detached frozen copy, or `null` when it is not
 * one. Reads own data properties only; a getter or a class instance is not an offer.
 */
export const readProtocolOffer = (valueArg: unknown): IProtocolOffer | null => {
  if (validateProtocolOffer(valueArg).length > 0) {
    return null;
  }
  const offer = valueArg as Record<string, unknown>;
  return Object.freeze({
    name: readOwnDataValue(offer, 'name') as string,
    minimumVersion: readOwnDataValue(offer, 'minimumVersion') as number,
    maximumVersion: readOwnDataValue(offer, 'maximumVersion') as number,
  });
};

/** Names every reason a value is not a protocol refusal. Never throws. */
export const validateProtocolRefusal = (valueArg: unknown, pathArg = 'protocol refusal'): string[] => {
  const refusal = readExactDataRecordOrNull(valueArg, ['code', 'reason', 'supported']);
  if (refusal === null) {
    return [`${pathArg} must be a record of exactly code, reason and supported`];
  }
  const reasons: string[] = [];
  if (readOwnDataValue(refusal, 'code') !== protocolContract.refusalCode) {
    reasons.push(`${pathArg}.code must be ${protocolContract.refusalCode}`);
  }
  if (!(protocolRefusalReasons as readonly unknown[]).includes(readOwnDataValue(refusal, 'reason'))) {
    reasons.push(`${pathArg}.reason must be one of ${protocolRefusalReasons.join(', ')}`);
  }
  reasons.push(...validateProtocolOffer(readOwnDataValue(refusal, 'supported'), `${pathArg}.supported`));
  return reasons;
};

/**
 * The protocol refusal inside an error payload, or `null` when the payload is anything else, so a
 * caller tells a protocol refusal apart from every other error by reading plain data only.
 */
export const readProtocolRefusal = (valueArg: unknown): IProtocolRefusal | null => {
  if (validateProtocolRefusal(valueArg).length > 0) {
    return null;
  }
  const refusal = valueArg as Record<string, unknown>;
  return Object.freeze({
    code: protocolContract.refusalCode,
    reason: readOwnDataValue(refusal, 'reason') as TProtocolRefusalReason,
    supported: readProtocolOffer(readOwnDataValue(refusal, 'supported')) as IProtocolOffer,
  });
};

/**
 * Judges a peer's offer against our own: the version both sides will speak, or the refusal to
 * answer. Pure, so both the relay and Cloudly judge an offer identically.
 */
export const negotiateProtocol = (
  ownOfferArg: IProtocolOffer,
  peerOfferArg: unknown,
): { version: number } | { refusal: IProtocolRefusal } => {
  const peerOffer = readProtocolOffer(peerOfferArg);
  const refuse = (reasonArg: TProtocolRefusalReason) => ({
    refusal: Object.freeze({ code: protocolContract.refusalCode, reason: reasonArg, supported: ownOfferArg }),
  });
  if (peerOffer === null) {
    return refuse('offer-invalid');
  }
  if (peerOffer.name !== ownOfferArg.name) {
    return refuse('protocol-mismatch');
  }
  const highest = Math.min(peerOffer.maximumVersion, ownOfferArg.maximumVersion);
  const lowest = Math.max(peerOffer.minimumVersion, ownOfferArg.minimumVersion);
  return highest >= lowest ? { version: highest } : refuse('version-unsupported');
};
