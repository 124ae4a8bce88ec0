import * as jose from 'jose';
import type { IRuntimeNetworkProjection } from './runtimenetwork.js';
import { canonicalizeJson } from '../private/canonicaljson.js';

/**
 * Project's own definition: how a node knows Cloudly issued a projection, without trusting the
 * relay that carried it. Cloudly signs the projection's canonical JSON (RFC 8785, the same bytes
 * its digest covers plus the digest itself) with its identity signing key and hands the signature
 * beside the projection as a compact JWS with a detached payload (RFC 7515 appendix F:
 * `<header>..<signature>`), header `{ alg: 'RS256', kid, typ }`. The node verifies it against
 * Cloudly's JWKS (`GET /.well-known/jwks.json`, current and previous key). RS256 is deterministic,
 * so one projection under one key always carries the same signature.
 */

export const runtimeNetworkProjectionSignatureType = 'serve.zone-runtime-network-projection+jws';

/** The exact bytes a projection's signature covers. */
export const canonicalRuntimeNetworkProjectionBytes = (projectionArg: IRuntimeNetworkProjection): Uint8Array =>
  new TextEncoder().encode(canonicalizeJson(projectionArg));

export type TRuntimeNetworkProjectionSignatureCheck =
  | { ok: true; kid: string }
  | { ok: false; reason: string };

/**
 * Verifies a projection's detached signature against a JWKS. Never throws: a malformed signature,
 * an unknown key, another type or altered bytes answer `{ ok: false, reason }`.
 */
export const verifyRuntimeNetworkProjectionSignature = async (
  projectionArg: IRuntimeNetworkProjection,
  signatureArg: string,
  jwksArg: { keys: jose.JWK[] },
): Promise<TRuntimeNetworkProjectionSignatureCheck> => {
  const parts = typeof signatureArg === 'string' ? signatureArg.split('.') : [];
  if (parts.length !== 3 || parts[1] !== '' || parts[0].length === 0 || parts[2].length === 0) {
    return { ok: false, reason: 'signature must be a compact JWS with a detached payload (<header>..<signature>)' };
  }
  let bytes: Uint8Array;
  try {
    bytes = canonicalRuntimeNetworkProjectionBytes(projectionArg);
  } catch {
    return { ok: false, reason: 'projection is not plain JSON' };
  }
  try {
    const keys = jose.createLocalJWKSet(jwksArg);
    const { protectedHeader } = await jose.compactVerify(`${parts[0]}.${jose.base64url.encode(bytes)}.${parts[2]}`, keys, { algorithms: ['RS256'] });
    if (protectedHeader.typ !== runtimeNetworkProjectionSignatureType) {
      return { ok: false, reason: `signature type must be ${runtimeNetworkProjectionSignatureType}` };
    }
    return { ok: true, kid: String(protectedHeader.kid) };
  } catch (error) {
    return { ok: false, reason: error instanceof jose.errors.JWKSNoMatchingKey ? 'signature names no key of the JWKS' : 'signature does not verify' };
  }
};
