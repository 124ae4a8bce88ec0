/** A cluster as Cloudly stores it. Project's own minimal definition. */
export interface ICluster {
  id: string;
  name: string;
  /** Server-managed; bumps on every committed change. */
  generation: number;
  createdAt: number;
  /** Bumps when the relay token is rotated; the old token stops working at once. */
  relayTokenGeneration: number;
  /** Project's own member: the cluster's labels (Kubernetes' syntax, ./clusterlabels.ts); absent when it has none. */
  labels?: Record<string, string>;
}

/** Project's own rule for a cluster's name: what `createCluster` admits (the dashboard checks it as you type). */
export const clusterNameRule = Object.freeze({
  minimumLength: 1,
  maximumLength: 64,
  pattern: /^[A-Za-z0-9][A-Za-z0-9._ -]*$/,
});

/** Every reason a value is not an admissible cluster name, with its path, in the server's words (ts/core/validation.ts isString). */
export const validateClusterName = (valueArg: unknown, pathArg = 'name'): string[] => {
  if (typeof valueArg !== 'string' || valueArg.length < clusterNameRule.minimumLength || valueArg.length > clusterNameRule.maximumLength) {
    return [`${pathArg} must be a string of ${clusterNameRule.minimumLength} to ${clusterNameRule.maximumLength} characters`];
  }
  return clusterNameRule.pattern.test(valueArg)
    ? []
    : [`${pathArg} has characters that are not allowed`];
};
