/** A cluster as Cloudly stores it. Project's own minimal definition. */
export interface ICluster {
  id: string;
  name: string;
  /** Server-managed; bumps on every committed change. */
  generation: number;
  createdAt: number;
  /** Bumps when the relay token is rotated; the old token stops working at once. */
  relayTokenGeneration: number;
}
