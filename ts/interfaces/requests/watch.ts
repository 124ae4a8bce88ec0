import type { IIdentity } from '../data/user.js';
import type { ITypedContract } from './admin.js';

/**
 * Project's own definitions: watching changes on the admin socket (docs/api-dashboard.md).
 *
 * `watchChanges` answers `{ watchId, revision }`; from then on Cloudly calls the socket's
 * `changeEvent` for every committed change that matches, in commit order, each with a revision
 * larger than the last. `sinceRevision` resumes after a revision this instance handed out; one it
 * no longer keeps (or from before its start) is refused `conflict` with `revision-gone`: re-list,
 * then watch again. A watcher that falls too far behind receives `watchExpired` and is dropped.
 */

export type TWatchedChange = 'created' | 'updated' | 'removed';

export interface IChangeEvent {
  watchId: string;
  revision: number;
  /** The document kind (collection name, as the audit log names it: `CloudlyCluster`, `CloudlyService`, ...). */
  kind: string;
  id: string;
  /** The document's generation after the change; for a removal, the generation the removal took. */
  generation: number;
  change: TWatchedChange;
  /** The cluster the document belongs to, when Cloudly knows one (a service's verdict names its service's cluster). */
  clusterId?: string;
  /** Who made the change, as its audit event names them: an admin's user id, `relay:<clusterId>`, or `cloudly`. */
  actor: { kind: 'admin' | 'relay' | 'cloudly'; id: string };
  /**
   * The public shape of the document at this generation (never secrets). Absent for a removal,
   * for kinds that have no public shape, and when the document changed again before the event was
   * read (a later event carries that change).
   */
  document?: unknown;
}

export type IReq_Admin_WatchChanges = ITypedContract<
  'watchChanges',
  { identity: IIdentity; kinds?: string[]; clusterId?: string; sinceRevision?: number },
  { watchId: string; revision: number }
>;

export type IReq_Admin_UnwatchChanges = ITypedContract<
  'unwatchChanges',
  { identity: IIdentity; watchId: string },
  { stopped: boolean }
>;

/** Cloudly → admin socket: one change. The answer is `{}`; Cloudly does not wait for it before the next. */
export type IReq_Cloudly_Admin_ChangeEvent = ITypedContract<'changeEvent', IChangeEvent, Record<string, never>>;

/** Cloudly → admin socket: the watch ended; `reason` `too-far-behind` means re-list, then watch again. */
export type IReq_Cloudly_Admin_WatchExpired = ITypedContract<
  'watchExpired',
  { watchId: string; revision: number; reason: 'too-far-behind' },
  Record<string, never>
>;
