/**
 * Corestore shapes that the control plane has to name in its own contracts.
 */

/**
 * How Corestore identifies a database it allocated itself (allocation-managed). Corestore hands
 * it out at allocation time and expects the identical value back on every later call about that
 * database. It deliberately holds no principal, URI, password or provider evidence, so Cloudly may
 * store it, sign it into an authority and quote it in a refusal without leaking a credential.
 */
export interface ICorestoreDatabaseAllocationReference {
  purpose: 'scratch-rehearsal';
  rehearsalId: string;
  allocationId: string;
  generation: number;
  bindingSha256: string;
  receiptSha256: string;
}
