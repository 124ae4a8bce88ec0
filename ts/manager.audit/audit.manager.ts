import type { Filter } from 'mongodb';
import type { Cloudly } from '../classes.cloudly.js';
import type { IAuditEvent, IAuditEventFilter } from '../interfaces/data/audit.js';
import { decodePageCursor, encodePageCursor, isPageCursorOf, isPageLimit, pageLimits } from '../core/pagination.js';
import { auditEventKind, type IAuditEventDocument } from '../core/store.js';
import { fieldProblem, fieldProblemReasons, invalidField, isIntegerIn, isString, type IFieldProblem, type TFieldCheck } from '../core/validation.js';
import { adminQuery, registerOperations, type TOperationRequest, type TOperationAnswer } from '../core/operations.js';

/**
 * The audit log's read side and its retention. The events are written by the store itself, in
 * step with every committed change (see `DocumentStore.appendAudit`); this manager only answers
 * `getAuditEvents` and forgets events older than `CLOUDLY_AUDIT_RETENTION_DAYS`.
 */

/** The limits every admin list shares (ts/core/pagination.ts). */
export const auditPageLimits = pageLimits;
const retentionSweepIntervalMs = 3600_000;
const dayMs = 24 * 3600_000;

interface IAuditCursor {
  at: number;
  id: string;
}

// The log is newest first, so its position is (at, id) rather than an id alone; the cursor's
// envelope is the one every list uses.
const encodeCursor = (eventArg: IAuditEvent): string => encodePageCursor('getAuditEvents', { at: eventArg.at, id: eventArg.id });

/** The position a cursor names, or null when it is not one this server handed out. */
export const decodeAuditCursor = (cursorArg: string): IAuditCursor | null => {
  const value = decodePageCursor('getAuditEvents', cursorArg) as Record<string, unknown> | undefined;
  return value && typeof value === 'object' && Number.isSafeInteger(value.at) && typeof value.id === 'string' && value.id.length <= 1024
    ? { at: value.at as number, id: value.id }
    : null;
};

const isEpochMs: TFieldCheck = isIntegerIn(0, Number.MAX_SAFE_INTEGER, 'must be epoch milliseconds (a non-negative integer)');

const filterChecks: Record<keyof IAuditEventFilter, TFieldCheck> = {
  targetKind: isString(1, 128),
  targetId: isString(1, 256),
  actorId: isString(1, 256),
  method: isString(1, 128),
  since: isEpochMs,
  until: isEpochMs,
};

const isAuditFilter: TFieldCheck = (valueArg, pathArg) => {
  if (!valueArg || typeof valueArg !== 'object' || Array.isArray(valueArg)) {
    return [invalidField(pathArg, `must be an object`)];
  }
  const record = valueArg as Record<string, unknown>;
  const reasons: IFieldProblem[] = [];
  for (const key of Object.keys(record)) {
    const check = (filterChecks as Record<string, TFieldCheck | undefined>)[key];
    if (!check) {
      reasons.push(fieldProblem(`${pathArg}.${key}`, fieldProblemReasons.unknown, `is not a filter of the audit log`));
    } else if (record[key] !== undefined) {
      reasons.push(...check(record[key], `${pathArg}.${key}`));
    }
  }
  return reasons;
};

const isCursor: TFieldCheck = isPageCursorOf('getAuditEvents', (valueArg) => (typeof valueArg === 'string' ? decodeAuditCursor(valueArg) ?? undefined : undefined));

const toPublicEvent = (docArg: IAuditEventDocument): IAuditEvent => {
  const event: IAuditEvent = {
    id: docArg.id,
    at: docArg.at,
    actor: { kind: docArg.actor.kind, id: docArg.actor.id },
    method: docArg.method,
    target: { kind: docArg.target.kind, id: docArg.target.id },
    outcome: docArg.outcome,
    generationBefore: docArg.generationBefore,
    generationAfter: docArg.generationAfter,
  };
  if (docArg.mutationId) {
    event.mutationId = docArg.mutationId;
  }
  if (docArg.cause) {
    event.cause = { kind: docArg.cause.kind, id: docArg.cause.id };
  }
  if (docArg.changed && docArg.changed.length > 0) {
    event.changed = docArg.changed.map(({ field, before, after }) => ({ field, before, after }));
  }
  return event;
};

export class AuditManager {
  private sweepTimer: NodeJS.Timeout | null = null;

  constructor(private readonly cloudly: Cloudly) {
    registerOperations(cloudly, [adminQuery({
      method: 'getAuditEvents',
      access: 'read',
      input: { required: {}, optional: { cursor: isCursor, limit: isPageLimit, filter: isAuditFilter } },
      check: (request) => (request.filter?.since !== undefined && request.filter.until !== undefined && request.filter.until < request.filter.since
        ? [invalidField('request.filter.until', 'must not be before request.filter.since')]
        : []),
      run: (request) => this.readEvents(request),
    })]);
  }

  /** One page of the log, newest first, under the request's filter. */
  private async readEvents(request: TOperationRequest<'getAuditEvents'>): Promise<TOperationAnswer<'getAuditEvents'>> {
    const limit = request.limit ?? auditPageLimits.defaultLimit;
    const query: Record<string, unknown> = {};
    const filter = request.filter ?? {};
    if (filter.targetKind !== undefined) query['target.kind'] = filter.targetKind;
    if (filter.targetId !== undefined) query['target.id'] = filter.targetId;
    if (filter.actorId !== undefined) query['actor.id'] = filter.actorId;
    if (filter.method !== undefined) query.method = filter.method;
    const at: Record<string, number> = {};
    if (filter.since !== undefined) at.$gte = filter.since;
    if (filter.until !== undefined) at.$lt = filter.until;
    const clauses: Array<Record<string, unknown>> = [query];
    if (Object.keys(at).length > 0) {
      clauses.push({ at });
    }
    if (request.cursor !== undefined) {
      // Strictly after the cursor's event in the newest-first order: older, or as old with a smaller id.
      const cursor = decodeAuditCursor(request.cursor)!;
      clauses.push({ $or: [{ at: { $lt: cursor.at } }, { at: cursor.at, id: { $lt: cursor.id } }] });
    }
    const docs = await this.cloudly.store.find(auditEventKind, { $and: clauses } as Filter<IAuditEventDocument>, {
      sort: { at: -1, id: -1 },
      limit: limit + 1,
    });
    const events = docs.slice(0, limit).map(toPublicEvent);
    return docs.length > limit ? { events, nextCursor: encodeCursor(events[events.length - 1]) } : { events };
  }

  public async start(): Promise<void> {
    await this.sweep();
    this.sweepTimer = setInterval(() => {
      void this.sweep().catch((error: unknown) => this.cloudly.logger.error({ err: error }, 'audit retention sweep failed'));
    }, retentionSweepIntervalMs);
    this.sweepTimer.unref();
  }

  public async stop(): Promise<void> {
    if (this.sweepTimer) {
      clearInterval(this.sweepTimer);
      this.sweepTimer = null;
    }
  }

  /** Forgets events older than the retention; safe to run on several instances at once. */
  public async sweep(nowArg = Date.now()): Promise<number> {
    const cutoff = nowArg - this.cloudly.config.auditRetentionDays * dayMs;
    const result = await this.cloudly.store.collection(auditEventKind).deleteMany({ at: { $lt: cutoff } });
    if (result.deletedCount > 0) {
      this.cloudly.logger.info({ deleted: result.deletedCount, retentionDays: this.cloudly.config.auditRetentionDays }, 'audit events past retention forgotten');
    }
    return result.deletedCount;
  }
}
