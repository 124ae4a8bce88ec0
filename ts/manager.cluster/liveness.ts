import { defineDocumentKind, ownedByClusterOfId, type IStoredDocument, type TDecision } from '../core/store.js';
import type { IRuntimeLiveness, TRuntimeLivenessReason } from '../interfaces/data/serviceruntimestatus.js';

/**
 * A cluster's liveness: whether what Cloudly shows of it is current. What Cloudly shows about a
 * cluster is only as current as its relay: past a grace without a live relay session, or with the
 * relay's observed-state reports older than a bound, its services read `unknown`, never
 * `converged` (docs/reconciler.md, "Liveness"). Kept as one derived document per cluster, written
 * only by the liveness controller (./liveness.controller.ts), read by the verdict.
 */

export interface IClusterLivenessDocument extends IStoredDocument {
  /** Equal to `id`. */
  clusterId: string;
  /** Null while the cluster is current; otherwise why not, and since when. */
  unknown: IRuntimeLiveness | null;
}

export const clusterLivenessKind = defineDocumentKind<IClusterLivenessDocument>('CloudlyClusterLiveness', { owners: ownedByClusterOfId });

export interface ILivenessSettings {
  /** How long a cluster may be without a live relay session before its services read `unknown`. */
  graceMs: number;
  /** How old the relay's newest stored observed-state report may be while it is connected. */
  observedStaleMs: number;
  /** The relay lease's lifetime: a lease that ran out unreleased was last renewed this long before it ran out. */
  leaseTtlMs: number;
}

export interface ILivenessFacts {
  /** The cluster's relay lease, as stored (null: no relay ever held it, or it was cleared at start). */
  lease: { sessionId: string | null; expiresAt: number; acquiredAt: number; releasedAt?: number } | null;
  /** The newest `reportedAt` of the cluster's stored observations (null: none stored). */
  lastReportAt: number | null;
  /** Since when this instance has been looking (it leads the reconciler since then): a fresh start is given the grace. */
  watchingSince: number;
  now: number;
}

export interface ILivenessJudgement {
  unknown: IRuntimeLiveness | null;
  /** When the judgement changes by itself if nothing else happens (the grace runs out); null when it does not. */
  recheckAt: number | null;
  /** Of a connected, current cluster: when its newest report turns stale if no newer one is stored. */
  staleAt?: number;
}

/**
 * The liveness of a cluster from its facts. Pure.
 *
 * - A relay holds an unexpired lease: current, unless its newest report is older than
 *   `observedStaleMs` (counted from the report, the lease's acquisition or the watch's start,
 *   whichever is latest, so a reconnected relay or a restarted Cloudly gets a full window):
 *   `observed-state-stale`, since the last report.
 * - No relay holds it: the relay was last known there at `since` (the last renewal of a lease that
 *   ran out, else the later of its release and its last report, else the watch's start). Within `graceMs` of
 *   `since` (and of the watch's start) nothing changes yet, so a relay that moves between instances
 *   or reconnects shows no blip; after it, `relay-disconnected`, since `since`.
 */
export const judgeClusterLiveness = (factsArg: ILivenessFacts, settingsArg: ILivenessSettings): ILivenessJudgement => {
  const { lease, lastReportAt, watchingSince, now } = factsArg;
  const connected = lease !== null && lease.sessionId !== null && lease.expiresAt > now;
  if (connected) {
    const reportWindowFrom = Math.max(lastReportAt ?? 0, lease.acquiredAt, watchingSince);
    if (now - reportWindowFrom > settingsArg.observedStaleMs) {
      return { unknown: { state: 'unknown', reason: 'observed-state-stale', since: lastReportAt ?? reportWindowFrom }, recheckAt: null };
    }
    return { unknown: null, recheckAt: null, staleAt: reportWindowFrom + settingsArg.observedStaleMs + 1 };
  }
  // A lease that ran out while still naming a socket was last renewed one lifetime before it ran out.
  const renewedAt = lease !== null && lease.sessionId !== null && lease.expiresAt > 0 ? lease.expiresAt - settingsArg.leaseTtlMs : null;
  const lastEvidence = Math.max(lease?.releasedAt ?? 0, lastReportAt ?? 0);
  const lastSeen = renewedAt ?? (lastEvidence > 0 ? lastEvidence : watchingSince);
  const deadline = Math.max(lastSeen, watchingSince) + settingsArg.graceMs;
  if (now < deadline) {
    return { unknown: null, recheckAt: deadline };
  }
  return { unknown: { state: 'unknown', reason: 'relay-disconnected', since: lastSeen }, recheckAt: null };
};

const sameLiveness = (leftArg: IRuntimeLiveness | null, rightArg: IRuntimeLiveness | null): boolean =>
  leftArg === rightArg || (leftArg !== null && rightArg !== null && leftArg.reason === rightArg.reason && leftArg.since === rightArg.since);

/** The stored liveness moves only when the judgement differs from it. Pure. */
export const decideClusterLiveness = (
  currentArg: IClusterLivenessDocument | null,
  clusterIdArg: string,
  unknownArg: IRuntimeLiveness | null,
): TDecision<IClusterLivenessDocument> => {
  if (!currentArg) {
    return { kind: 'create', doc: { id: clusterIdArg, clusterId: clusterIdArg, unknown: unknownArg } };
  }
  return sameLiveness(currentArg.unknown, unknownArg) ? { kind: 'keep' } : { kind: 'write', change: { set: { unknown: unknownArg } } };
};

export type { TRuntimeLivenessReason };
