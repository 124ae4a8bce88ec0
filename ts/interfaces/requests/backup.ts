import type { IOperation } from './operation.js';
import type { ITypedContract } from './admin.js';
import type { IIdentity } from '../data/user.js';
import type { IService } from '../data/service.js';
import type {
  IArchivePruneResult,
  IArchiveRetentionPolicy,
  IBackupArchiveObject,
  IBackupReplicationResult,
  TBackupSnapshot,
  TIsolatedRestoreResourceMapping,
} from '../data/backup.js';
import type { IIsolatedRestoreNodeState } from '../data/isolatedrestore.js';
import type { ICorestoreDatabaseClosureDescriptor } from '../data/corestoreclosure.js';
import type { IPageRequest, IPageAnswer } from './pagination.js';
import type { IBackupSchedule, IBackupScheduleSpec } from '../data/backupschedule.js';

/**
 * Node-addressed backups, streamed database closures and isolated restores.
 *
 * Bytes never travel inside a JSON envelope: a request or response carries a stream
 * reference, and the bytes follow as binary frames on the same authenticated socket.
 */

/**
 * A reference to a byte stream on the socket that carries the envelope. Project's own
 * definition. `send`: the requester sends the bytes; `receive`: the requester receives them.
 *
 * A departure from the spec: seed 000 types `closure` and `archive` as typedrequest's
 * `TVirtualStream<'send' | 'receive'>`, which no published `@api.global/typedrequest` (3.3.0 is
 * the newest) nor its interfaces package defines; its VirtualStream carries chunks as JSON inside
 * `##VirtualStream##` requests. A relay built on upstream's types must send this reference and
 * binary frames instead (docs/relay-protocol.md section 8); typedrequest's own stream markers are
 * refused at the boundary, never misread.
 */
export interface TVirtualStream<TDirection extends 'send' | 'receive'> {
  kind: 'cloudly-byte-stream';
  /** 32 lowercase hex digits, unique on its socket; binary frames name it. */
  streamId: string;
  direction: TDirection;
}

/** Backs up one service on one exact node of the cluster the relay serves. */
export type IReq_Cloudly_Relay_BackupClusterService = ITypedContract<
  'backupClusterService',
  {
    /** The node whose Corestore holds the service's data. */
    nodeId: string;
    backupId: string;
    service: IService;
    tags?: Record<string, string>;
    replication?: { enabled: boolean };
  },
  { snapshots: TBackupSnapshot[]; replication?: IBackupReplicationResult }
>;

/** Restores one service on one exact node of the cluster the relay serves. */
export type IReq_Cloudly_Relay_RestoreClusterService = ITypedContract<
  'restoreClusterService',
  {
    /** The node whose Corestore receives the restore. */
    nodeId: string;
    backupId: string;
    service: IService;
    snapshots: TBackupSnapshot[];
    clear?: boolean;
    resourceTypes?: Array<TBackupSnapshot['type']>;
    replication?: { enabled: boolean };
  },
  { restored: TBackupSnapshot[] }
>;

/** Prunes one exact node's archive; `found: false` says the node has none, and is no failure. */
export type IReq_Cloudly_Relay_PruneClusterNodeArchive = ITypedContract<
  'pruneClusterNodeArchive',
  {
    nodeId: string;
    retention: IArchiveRetentionPolicy;
    dryRun?: boolean;
  },
  { found: boolean; result?: IArchivePruneResult }
>;

/**
 * The relay sends one service database closure to Cloudly on its own session (no identity:
 * the session names the cluster). `accepted` only permits sending; the stream's completion
 * receipt is what says Cloudly durably holds the bytes.
 */
export type IReq_Relay_Cloudly_BackupServiceDatabaseClosure = ITypedContract<
  'backupServiceDatabaseClosure',
  {
    backupId: string;
    serviceId: string;
    /** The node the closure was exported from. */
    nodeId: string;
    /** Validated before any byte moves. */
    descriptor: ICorestoreDatabaseClosureDescriptor;
    closure: TVirtualStream<'send'>;
  },
  { accepted: boolean }
>;

/**
 * What the sender of a closure receives when the stream completes: Cloudly holds exactly
 * these bytes durably. Project's own definition.
 */
export interface IServiceDatabaseClosureReceipt {
  backupId: string;
  serviceId: string;
  nodeId: string;
  byteLength: number;
  sha256: string;
  /** Epoch milliseconds at which the bytes became durable. */
  storedAt: number;
}

/** The relay fetches one service database closure back: the descriptor first, then the bytes. */
export type IReq_Relay_Cloudly_RestoreServiceDatabaseClosure = ITypedContract<
  'restoreServiceDatabaseClosure',
  {
    backupId: string;
    serviceId: string;
    /** The node the closure is restored onto. */
    nodeId: string;
  },
  {
    descriptor: ICorestoreDatabaseClosureDescriptor;
    closure: TVirtualStream<'receive'>;
  }
>;

/** Fields every Cloudly → relay isolated-restore call carries. */
interface IIsolatedRestoreRouting {
  /** Compact RS256 grant for exactly this operation; carried untouched, never logged. */
  restoreGrant: string;
  clusterId: string;
  targetNodeName: string;
  restoreId: string;
}

/** Prepares an isolated restore on one node. */
export type IReq_Cloudly_Coreflow_PrepareIsolatedRestore = ITypedContract<
  'coreflowPrepareIsolatedRestore',
  IIsolatedRestoreRouting & {
    mappings: TIsolatedRestoreResourceMapping[];
    manifest: IBackupArchiveObject[];
  },
  { state: IIsolatedRestoreNodeState }
>;

/** Read-only status for one exact cluster/node/restore. */
export type IReq_Cloudly_Coreflow_GetIsolatedRestoreStatus = ITypedContract<
  'coreflowGetIsolatedRestoreStatus',
  IIsolatedRestoreRouting,
  { state: IIsolatedRestoreNodeState }
>;

/** Executes a fully staged isolated restore. */
export type IReq_Cloudly_Coreflow_ExecuteIsolatedRestore = ITypedContract<
  'coreflowExecuteIsolatedRestore',
  IIsolatedRestoreRouting & { expectedRevision: number },
  { state: IIsolatedRestoreNodeState }
>;

/** Removes an isolated restore's scratch namespace. */
export type IReq_Cloudly_Coreflow_CleanupIsolatedRestore = ITypedContract<
  'coreflowCleanupIsolatedRestore',
  IIsolatedRestoreRouting & { expectedRevision: number },
  { state: IIsolatedRestoreNodeState }
>;

/** Cloudly sends one manifest object's bytes to the relay's node; one object per call. */
export type IReq_Cloudly_Relay_StageIsolatedRestoreArchive = ITypedContract<
  'stageIsolatedRestoreArchive',
  IIsolatedRestoreRouting & {
    expectedRevision: number;
    /** The manifest entry these bytes complete. */
    object: IBackupArchiveObject;
    archive: TVirtualStream<'send'>;
  },
  { state: IIsolatedRestoreNodeState }
>;

// ---- Administrator → Cloudly. Project's own definitions. ----

/** A backup Cloudly ordered, as it records it. Project's own definition. */
export interface IServiceBackupRecord {
  backupId: string;
  clusterId: string;
  nodeId: string;
  serviceId: string;
  createdAt: number;
  generation: number;
  /** Project's own member: the stored state of the backup's last attempt. */
  state: 'running' | 'completed' | 'failed';
  /** Project's own member: why the last attempt failed (`interrupted`, `operation-cancelled`, a relay reason). */
  failureReason?: string;
  /** Project's own member: the operation of the last attempt (absent on backups recorded before operations). */
  operationId?: string;
  snapshots: TBackupSnapshot[];
  replication?: IBackupReplicationResult;
  /** Present once Cloudly durably holds the service's database closure. */
  closure?: { descriptor: ICorestoreDatabaseClosureDescriptor; storedAt: number };
  /** Project's own member: the schedule that ordered this backup, and the occurrence (epoch ms UTC) it ran for. */
  scheduleId?: string;
  occurrenceAt?: number;
  /** Project's own member: the last verification of what Cloudly stored for it (`verifyServiceBackup`). */
  verification?: IBackupVerification;
  /** Project's own member: the newest restore drill of this backup (docs/api/backups.md, "Drills"). */
  drill?: IBackupDrillReceipt;
}

/**
 * What a restore drill recorded of one backup: restored through the isolated-restore flow onto a
 * drill node, the node's status awaited, then cleaned up. Project's own definition.
 */
export interface IBackupDrillReceipt {
  drillId: string;
  backupId: string;
  /** The drill node the backup was restored onto. */
  nodeId: string;
  /** `running`, `ok`, `failed` (with `reason`) or `interrupted` (its instance died while it ran). */
  outcome: 'running' | 'ok' | 'failed' | 'interrupted';
  /** Why it failed: the first reason of the drill's operation (`isolated-restore-failed`, `relay-disconnected`, ...). */
  reason?: string;
  /** The node's or the refusal's own words, bounded. */
  detail?: string;
  startedAt: number;
  finishedAt?: number;
  durationMs?: number;
  /** The bytes the node staged and proved (size and sha256 of every manifest object); 0 unless the drill completed. */
  bytes: number;
  restoreId: string;
  operationId: string;
  /** The schedule whose drill this was; absent for one ordered by `drillServiceBackup`. */
  scheduleId?: string;
  /** The scratch restore is gone from the node; false while its cleanup is still owed. */
  cleanedUp: boolean;
  /** Why the cleanup will not be asked again: the node refused it (its reason, or `cleanup-answered-<phase>`). */
  cleanupReason?: string;
}

/**
 * Restores a completed backup onto a drill node through the isolated-restore flow, waits for the
 * node's status and cleans up; the receipt is recorded on the backup (project's own method).
 * Answered at once with the drill's operation.
 */
export type IReq_Admin_DrillServiceBackup = ITypedContract<
  'drillServiceBackup',
  { identity: IIdentity; backupId: string; nodeId: string; drillId?: string },
  { drillId: string; operation: IOperation }
>;

/**
 * The outcome of reading a backup's stored closures back and hashing them against the receipts
 * recorded when they arrived. Project's own definition.
 */
export interface IBackupVerification {
  outcome: 'ok' | 'mismatch' | 'missing';
  verifiedAt: number;
  /** How many stored objects were read back. */
  checkedObjects: number;
  /** The object that failed, as its receipt names it, and what was found instead. */
  failedObject?: {
    path: string;
    size: number;
    sha256: string;
    /** `blob-not-found`, `blob-corrupt`, `size-differs` or `sha256-differs`. */
    problem: string;
    actualSize?: number;
    actualSha256?: string;
  };
}

/**
 * Reads every closure Cloudly stored for a completed backup back from the blob store, re-hashes it
 * against its receipt and records the outcome on the backup (project's own method).
 */
export type IReq_Admin_VerifyServiceBackup = ITypedContract<
  'verifyServiceBackup',
  { identity: IIdentity; backupId: string },
  { backup: IServiceBackupRecord }
>;

/**
 * Orders a backup of one service on one exact node. Answered at once (project's own shape): the
 * backup as recorded (`running`) and the operation that runs it (docs/api-dashboard.md); the
 * finished backup is the operation's `result`. A completed order repeated is answered as it is;
 * an order repeated while it runs answers its running operation.
 */
export type IReq_Admin_CreateServiceBackup = ITypedContract<
  'createServiceBackup',
  {
    identity: IIdentity;
    clusterId: string;
    nodeId: string;
    serviceId: string;
    /** Optional caller-chosen id, which makes the call safe to repeat. */
    backupId?: string;
    tags?: Record<string, string>;
    replication?: { enabled: boolean };
    /** Project's own member: the same mutationId again answers the same operation. */
    mutationId?: string;
  },
  /** `operation` is absent only for a backup completed before operations existed. */
  { backup: IServiceBackupRecord; operation?: IOperation }
>;

/**
 * Restores a recorded backup onto the node it was taken on, or another node of its cluster.
 * Answered at once (project's own shape) with the operation; `restored` is in its `result`.
 */
export type IReq_Admin_RestoreServiceBackup = ITypedContract<
  'restoreServiceBackup',
  {
    identity: IIdentity;
    backupId: string;
    nodeId?: string;
    clear?: boolean;
    resourceTypes?: Array<TBackupSnapshot['type']>;
    /** Project's own member: the same mutationId again answers the same operation. */
    mutationId?: string;
  },
  { backup: IServiceBackupRecord; operation: IOperation }
>;

/** Lists recorded backups, optionally of one service. */
export type IReq_Admin_GetServiceBackups = ITypedContract<
  'getServiceBackups',
  { identity: IIdentity; serviceId?: string; clusterId?: string } & IPageRequest,
  { backups: IServiceBackupRecord[] } & IPageAnswer
>;

/** Prunes one exact node's archive through the cluster's relay. */
export type IReq_Admin_PruneClusterNodeArchive = ITypedContract<
  'adminPruneClusterNodeArchive',
  {
    identity: IIdentity;
    clusterId: string;
    nodeId: string;
    retention: IArchiveRetentionPolicy;
    dryRun?: boolean;
  },
  { found: boolean; result?: IArchivePruneResult }
>;

/**
 * Starts an isolated restore of a recorded backup on one node: Cloudly derives the cluster
 * and source service from the backup, prepares the restore and stages every manifest
 * object, each call under its own restore grant. Answered at once (project's own shape) with the
 * restore's id and the operation that prepares and stages it; the node's state is in its `result`.
 */
export type IReq_Admin_CreateIsolatedRestore = ITypedContract<
  'createIsolatedRestore',
  {
    identity: IIdentity;
    backupId: string;
    targetNodeName: string;
    restoreId?: string;
    mappings: TIsolatedRestoreResourceMapping[];
    /** Project's own member: the same mutationId again answers the same operation. */
    mutationId?: string;
  },
  { restoreId: string; operation: IOperation }
>;

/** Reads, executes or cleans up an isolated restore, under a fresh grant for that operation. */
export type IReq_Admin_StepIsolatedRestore = ITypedContract<
  'stepIsolatedRestore',
  {
    identity: IIdentity;
    restoreId: string;
    operation: 'status' | 'execute' | 'cleanup';
    /** Required for execute and cleanup. */
    expectedRevision?: number;
  },
  { state: IIsolatedRestoreNodeState }
>;

/**
 * Creates a backup schedule (project's own method, docs/api/backups.md "Schedules"). The cron
 * expression and retention are checked whole: every problem is named.
 */
export type IReq_Admin_CreateBackupSchedule = ITypedContract<
  'createBackupSchedule',
  { identity: IIdentity; schedule: IBackupScheduleSpec; scheduleId?: string },
  { schedule: IBackupSchedule }
>;

/** Replaces a schedule's spec, if it still has the generation the caller read. */
export type IReq_Admin_UpdateBackupSchedule = ITypedContract<
  'updateBackupSchedule',
  { identity: IIdentity; scheduleId: string; expectedGeneration: number; schedule: IBackupScheduleSpec },
  { schedule: IBackupSchedule }
>;

/** Deletes a schedule, if it still has the generation the caller read; its backups stay. */
export type IReq_Admin_DeleteBackupSchedule = ITypedContract<
  'deleteBackupSchedule',
  { identity: IIdentity; scheduleId: string; expectedGeneration: number },
  { schedule: IBackupSchedule }
>;

/** Lists schedules with what the controller recorded of each, optionally those naming one service or cluster. */
export type IReq_Admin_GetBackupSchedules = ITypedContract<
  'getBackupSchedules',
  { identity: IIdentity; serviceId?: string; clusterId?: string } & IPageRequest,
  { schedules: IBackupSchedule[] } & IPageAnswer
>;

/** What retention decides for one backup, and why. Project's own definition. */
export interface IBackupRetentionDecision {
  backupId: string;
  createdAt: number;
  action: 'keep' | 'remove';
  /**
   * Why: for a kept backup each rule that keeps it (`last-1`, `daily 2026-03-01`, `weekly 2026-W09`,
   * `monthly 2026-03`, `newest-verified`, `in-use`); for a removed one `outside-policy` or `failed`.
   */
  reasons: string[];
}

/**
 * A backup of the schedule that retention is deleting now (project's own shape): its stored
 * closures and record go first, then the relay prunes the node's archive; until both are done the
 * deletion is listed here.
 */
export interface IBackupDeletionState {
  backupId: string;
  serviceId: string;
  /** The node whose archive is pruned; absent on deletions recorded before nodes were pruned. */
  nodeId?: string;
  startedAt: number;
  /** The stored closures and the backup record are gone. */
  closuresRemoved: boolean;
  /** The node's prune waits: `reason` (`cluster-unknown`, `relay-not-connected`, ...), since when, how often it was tried. */
  nodePruneWaiting?: { reason: string; detail?: string; since: number; attempts: number };
}

/**
 * What a schedule's retention would do now, per service (project's own method): the dry run of
 * the retention the `backup-retention` controller applies after each occurrence, and the
 * deletions of the schedule's backups not finished yet. Reads only.
 */
export type IReq_Admin_GetBackupRetentionPlan = ITypedContract<
  'getBackupRetentionPlan',
  { identity: IIdentity; scheduleId: string },
  { scheduleId: string; services: Array<{ serviceId: string; decisions: IBackupRetentionDecision[] }>; deleting: IBackupDeletionState[] }
>;
