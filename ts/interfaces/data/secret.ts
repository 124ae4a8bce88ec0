/**
 * Names one immutable version of a secret without carrying its value. A workload environment
 * entry that points at a secret carries this reference; only the node that runs the workload
 * resolves it into the value. Project's own definition.
 */
export interface ISecretVersionReference {
  /** The secret whose versions this one belongs to. */
  secretId: string;
  /** This exact version; a rotated secret gets a new version id and keeps its secret id. */
  secretVersionId: string;
}
