/** Words for what the API answers in codes. */

const waitingReasons: Record<string, string> = {
  'node-network-pending': 'Waiting for the runtime network of its node(s) to be ready.',
  conflict: 'Waiting on a conflict: a node holds a newer claim of one of its volumes than Cloudly issued (see Local storage claims: an administrator supersedes it), or another change to the same resources comes first.',
  'failure-backoff': 'Waiting after a failure before the next attempt (backoff).',
  'storage-import-pending': 'Waiting for a volume import onto the node to finish.',
  'bindings-pending': 'Waiting for its platform bindings (databases, buckets…) to be ready.',
  'legacy-adoption-pending': 'Waiting until legacy Corestore resources are adopted.',
  'secrets-pending': 'Waiting until its secrets reach its workloads (the relay\u2019s secret manifest does not list them yet).',
};

const refusedReasons: Record<string, string> = {
  'cluster-runtime-missing': 'Refused: the cluster has no runtime Cloudly can place services on.',
  'organization-missing': 'Refused: the organization the service belongs to does not exist.',
  'image-plan-missing': 'Refused: no immutable image plan exists for the service image.',
  'platform-unsupported': 'Refused: the image platform is not supported by the cluster nodes.',
  'secrets-unsupported': 'Refused: the service uses secrets in a way the runtime cannot deliver.',
  'volumes-unsupported': 'Refused: the service volumes cannot be provided.',
  'port-protocol-unsupported': 'Refused: a port uses a protocol the runtime does not support.',
  'ports-too-many': 'Refused: the service declares more ports than allowed.',
  'readiness-target-undeclared': 'Refused: the readiness check targets a port the service does not declare.',
  'environment-too-large': 'Refused: its environment (plain values and secrets) exceeds 32 KiB.',
  'no-eligible-node': 'Refused: no node of the cluster can run it (its placement nodes are gone or unfit).',
  'replica-limit': 'Refused: more replicas than the runtime allows.',
  'node-authority-unsupported': 'Refused: the node authority it needs is not supported.',
  'network-policy-missing': 'Refused: it requests a network policy, and the cluster\u2019s network authority enforces none.',
  'network-policy-mismatch': 'Refused: the cluster\u2019s network authority cannot express its egress, or does not govern every node it may run on.',
  'network-workload-pool-missing': 'Refused: the cluster has no workload address pool.',
  'network-workload-pool-exhausted': 'Refused: the workload address pool is exhausted.',
  'secret-version-missing': 'Refused: a secret it names is not held sealed for its cluster (missing version, or sealed to a recipient the relay no longer holds).',
  'volume-driver-unsupported': 'Refused: a volume uses a driver other than a node-local directory.',
  'volume-options-unsupported': 'Refused: a volume carries driver or mount options a local claim cannot express.',
  'volume-shared-unsupported': 'Refused: a volume would be shared between replicas on several nodes.',
  'volume-placement-unsupported': 'Refused: a volume needs a placement pinned to one node.',
  'volume-initialization-unknown': 'Refused: a volume has no initialization; set one (empty or import) on the service page.',
  'volume-ownership-unknown': 'Refused: a volume\u2019s owner is not known; state one in its initialization.',
};

/** The runtime status's state and reason, said in words. */
export const explainRuntimeStatus = (statusArg: { state: string; reason: string | null } | null | undefined): string => {
  if (!statusArg) {
    return 'Not judged yet: Cloudly has not produced a verdict for this service.';
  }
  switch (statusArg.state) {
    case 'converged':
      return 'Converged: every replica runs the current spec.';
    case 'converging':
      return 'Converging: the nodes are applying the current spec.';
    case 'waiting':
      return waitingReasons[statusArg.reason ?? ''] ?? `Waiting: ${statusArg.reason}.`;
    case 'refused':
      return refusedReasons[statusArg.reason ?? ''] ?? `Refused: ${statusArg.reason}.`;
    default:
      return `${statusArg.state}${statusArg.reason ? `: ${statusArg.reason}` : ''}`;
  }
};

/**
 * Why a service reads `unknown` (its cluster is not current), with the last verdict it had: what
 * is shown is only as current as the relay, so nothing here is green.
 */
export const explainUnknown = (
  unknownArg: { reason: string; since: number },
  lastArg: { state: string; reason: string | null } | null | undefined,
): string => {
  const why = unknownArg.reason === 'relay-disconnected'
    ? `Unknown: the cluster's relay has not been connected since ${formatTime(unknownArg.since)}.`
    : `Unknown: the relay has reported nothing newer than ${formatTime(unknownArg.since)}.`;
  return lastArg ? `${why} Last verdict: ${lastArg.state}${lastArg.reason ? ` (${lastArg.reason})` : ''}.` : why;
};

export const formatTime = (msArg: number | null | undefined): string => {
  if (typeof msArg !== 'number' || !Number.isFinite(msArg)) {
    return '—';
  }
  const date = new Date(msArg);
  return `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
};

export const formatBytes = (bytesArg: number): string => {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytesArg;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
};

const secretKey = /token|jwt|secret|password|bearer|credentialmaterial|privatekey/i;

/** A copy for display with every member whose name suggests a secret replaced. */
export const redact = (valueArg: unknown, depthArg = 0): unknown => {
  if (depthArg > 20 || valueArg === null || typeof valueArg !== 'object') {
    return valueArg;
  }
  if (Array.isArray(valueArg)) {
    return valueArg.map((entry) => redact(entry, depthArg + 1));
  }
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(valueArg as Record<string, unknown>)) {
    // Generations and references of a token are not the token.
    copy[key] = secretKey.test(key) && !/generation|reference|version|id$/i.test(key) ? '(hidden)' : redact(value, depthArg + 1);
  }
  return copy;
};

export const asJson = (valueArg: unknown): string => JSON.stringify(redact(valueArg), null, 2);

export const shortId = (idArg: string): string => (idArg.length > 14 ? `${idArg.slice(0, 12)}…` : idArg);
