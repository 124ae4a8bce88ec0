import type { IIdentity } from '../data/user.js';
import type { IAuditEvent, IAuditEventFilter } from '../data/audit.js';
import type { ITypedContract } from './admin.js';

/**
 * Project's own definition: the audit log, newest first, a page at a time. `nextCursor` is present
 * when there may be more; pass it back as `cursor` for the next page.
 */
export type IReq_Admin_GetAuditEvents = ITypedContract<
  'getAuditEvents',
  { identity: IIdentity; cursor?: string; limit?: number; filter?: IAuditEventFilter },
  { events: IAuditEvent[]; nextCursor?: string }
>;
