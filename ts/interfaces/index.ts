/**
 * Cloudly's contracts module: the types and pure functions of `@serve.zone/interfaces` that this
 * server implements, laid out as the upstream package lays them out. It performs no I/O and
 * imports nothing from the server, so relays and the dashboard can import it alone.
 *
 * Upstream releases it tracks (`commitinfo`, also served in GET /schema as `contracts`):
 * - 31.6.0 (diff from 31.4.0): the node Corestore endpoint, the Corestore allocation reference,
 *   isolated restore, node-addressed backup/restore/prune and `getClusterRelayRegistrations`;
 * - 32.23.0 (diff from 32.21.0): the runtime network, service runtime status, service volume
 *   initialization, runtime local storage claims, cluster ingress and Corestore legacy adoption;
 * - every other area is the project's own definition (`mirroredInterfacesVersion` answers null).
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
