import { createHash } from 'node:crypto';
import { canonicalizeJson } from '../interfaces/private/canonicaljson.js';

/**
 * What this instance last stored of each cluster's observed-state report, so that a relay
 * reporting the same thing again (its steady state: every report, every 30 s, unchanged) costs
 * one read of the published desired state instead of the reads and writes of a new report.
 *
 * An entry says: the elected socket `sessionId` reported the report with digest `digest`, it was
 * judged acceptable and stored whole at `storedAt`, and the published desired state had
 * generation `publishedGeneration` then. A report with the same socket, the same digest and the
 * same published generation is judged the same and would store the same (bar the time stamps),
 * because every fact the judge reads (the services and their spec revisions and replicas, the
 * removals, the nodes) is part of the published desired state. Until `refreshMs` after
 * `storedAt` such a report is answered without writing; the next one after that is stored whole
 * again, which renews the observations' `reportedAt`.
 *
 * Commits on this instance that change what the judge reads or what a report stores (a service,
 * a node, the desired state, the observations or assignments written by anything but a report)
 * forget the cluster's entry (`invalidate`); one whose cluster is unknown (a removal) forgets
 * every entry. A report stored while such a commit happened, or while another report of the
 * same cluster was stored, is not remembered (`begin` / `finish` compare an epoch and count the
 * reports in flight).
 * Another instance's commits reach the entry through the published generation.
 */
export class ObservedReportMemo {
  private readonly entries = new Map<string, { sessionId: string; digest: string; publishedGeneration: number; storedAt: number }>();
  /** Per cluster: how often its entry was invalidated or a report of it began; with `globalEpoch`. */
  private readonly epochs = new Map<string, number>();
  private globalEpoch = 0;
  /** Reports of each cluster being judged and stored now. */
  private readonly inFlight = new Map<string, number>();
  /** Reports answered from an entry, and reports stored whole (for tests and /metrics). */
  public hits = 0;
  public stores = 0;

  constructor(private readonly refreshMs: number) {}

  /** The digest of a report as the memo compares it: the canonical JSON of every member. */
  public static digestOf(reportArg: unknown): string {
    return createHash('sha256').update(canonicalizeJson(reportArg)).digest('hex');
  }

  /** Whether the report can be answered as the last stored one: same socket, same report, same published generation, not due for a refresh. */
  public matches(clusterIdArg: string, sessionIdArg: string, digestArg: string, publishedGenerationArg: number | null, nowArg: number): boolean {
    const entry = this.entries.get(clusterIdArg);
    const hit = entry !== undefined && publishedGenerationArg !== null && this.refreshMs > 0
      && entry.sessionId === sessionIdArg && entry.digest === digestArg
      && entry.publishedGeneration === publishedGenerationArg && nowArg - entry.storedAt < this.refreshMs;
    if (hit) {
      this.hits++;
    }
    return hit;
  }

  /** A report of the cluster begins to be judged and stored: the token `finish` needs. */
  public begin(clusterIdArg: string): { clusterEpoch: number; globalEpoch: number } {
    this.entries.delete(clusterIdArg);
    const clusterEpoch = (this.epochs.get(clusterIdArg) ?? 0) + 1;
    this.epochs.set(clusterIdArg, clusterEpoch);
    this.inFlight.set(clusterIdArg, (this.inFlight.get(clusterIdArg) ?? 0) + 1);
    return { clusterEpoch, globalEpoch: this.globalEpoch };
  }

  /**
   * A report begun with `begin` ended: `entryArg` is what it stored (null when it was refused or
   * failed, or stored nothing to remember). It is remembered only when nothing invalidated the
   * cluster and no other report of it ran meanwhile; when reports overlapped, none is (which of
   * them wrote last is not known).
   */
  public finish(
    clusterIdArg: string,
    tokenArg: { clusterEpoch: number; globalEpoch: number },
    entryArg: { sessionId: string; digest: string; publishedGeneration: number; storedAt: number } | null,
  ): void {
    const running = (this.inFlight.get(clusterIdArg) ?? 1) - 1;
    if (running === 0) {
      this.inFlight.delete(clusterIdArg);
    } else {
      this.inFlight.set(clusterIdArg, running);
    }
    const undisturbed = this.epochs.get(clusterIdArg) === tokenArg.clusterEpoch && this.globalEpoch === tokenArg.globalEpoch;
    if (entryArg) {
      this.stores++;
    }
    if (entryArg && undisturbed && running === 0) {
      this.entries.set(clusterIdArg, entryArg);
    } else if (running > 0 || !undisturbed) {
      this.invalidate(clusterIdArg);
    }
  }

  /** Forgets one cluster's entry (null: every entry). */
  public invalidate(clusterIdArg: string | null): void {
    if (clusterIdArg === null) {
      this.globalEpoch++;
      this.entries.clear();
      return;
    }
    this.entries.delete(clusterIdArg);
    this.epochs.set(clusterIdArg, (this.epochs.get(clusterIdArg) ?? 0) + 1);
  }

  /** Forgets a cluster whose socket closed (its next socket is another session anyway). */
  public forgetCluster(clusterIdArg: string): void {
    this.entries.delete(clusterIdArg);
  }

  public get size(): number {
    return this.entries.size;
  }
}
