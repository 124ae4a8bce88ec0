/**
 * Cloudly's contracts module: the types and pure functions of `@serve.zone/interfaces` that this
 * server implements, laid out as the upstream package lays them out. It performs no I/O and
 * imports nothing from the server, so relays and the dashboard can import it alone.
 */
export * as data from './data/index.js';
export * as requests from './requests/index.js';
export * as platform from './platform/index.js';
export * as protocol from './protocol/index.js';
export { commitinfo, mirroredInterfacesVersion, type IContractsMirror } from './commitinfo.js';
export {
  canonicalizeJson,
  computeDomainDigestHex,
  computeCanonicalJsonSha256Hex,
  sha256Hex,
} from './private/canonicaljson.js';
