/** Project's own definition: one field an update changed, as the audit event records it. */
export interface IAuditFieldChange {
  /** The member's path: a top-level field, or one or two levels into it (`runtime.image`). */
  field: string;
  /** The value before and after (null when absent); a value longer than the limit as a shortened JSON text. */
  before: unknown;
  after: unknown;
}

/** At most this many changed fields per event, each value at most this many characters of JSON. */
export const auditChangeLimits = Object.freeze({ fields: 16, valueChars: 256 } as const);

/**
 * Project's own definition (the upstream contracts name no audit log): one committed change to a
 * stored document, as `getAuditEvents` answers it: who, which method, which document, from which
 * generation to which. Holds values of the document only in `changed`, and only of the fields its
 * kind lists as safe to show (never of a kind that bears a secret).
 */
export interface IAuditEvent {
  /** Derived from the target, its incarnation and its generation: one change, one id. */
  id: string;
  /** Epoch milliseconds of the commit. */
  at: number;
  /** `admin` (the user id), `relay` (`relay:<clusterId>`) or `cloudly` (its own roll-forward and timers). */
  actor: { kind: 'admin' | 'relay' | 'cloudly'; id: string };
  /** The method whose handling made the change (`cloudly` for Cloudly's own work). */
  method: string;
  /** The document's kind (its collection, e.g. `CloudlyCluster`) and id. */
  target: { kind: string; id: string };
  outcome: 'created' | 'updated' | 'removed';
  /** 0 for a creation. */
  generationBefore: number;
  /** null for a removal. */
  generationAfter: number | null;
  mutationId?: string;
  /**
   * Project's own member, on Cloudly's own reconciles (`method` `reconcile`): the input change
   * that made it look again (a document's kind and id, or `CloudlyReconcilerResync` for a resync).
   */
  cause?: { kind: string; id: string };
  /**
   * Project's own member, on updates of kinds that list their shown fields (services, nodes,
   * clusters' names, accounts' role and state): what the update changed, before → after, at most
   * `auditChangeLimits.fields`. Absent when the kind lists none or nothing listed changed.
   */
  changed?: IAuditFieldChange[];
}

/** Project's own definition: what `getAuditEvents` may filter on; every member narrows. */
export interface IAuditEventFilter {
  targetKind?: string;
  targetId?: string;
  actorId?: string;
  method?: string;
  /** Epoch milliseconds, inclusive. */
  since?: number;
  /** Epoch milliseconds, exclusive. */
  until?: number;
}

/**
 * Project's own rule: a method that only reads (`get…`, `list…`, `watch…`, `unwatch…`). Reads never
 * change anything, but what they keep for themselves (a watch's registration, an inventory's
 * digest) can reach the log; views of the log hide such events unless asked to show them.
 */
export const isAuditReadMethod = (methodArg: string): boolean => /^(get|list|watch|unwatch)[A-Z]/.test(methodArg);
