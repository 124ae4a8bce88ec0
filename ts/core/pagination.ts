import type { Filter } from 'mongodb';
import type { IDocumentKind, IStoredDocument } from './store.js';
import type { IListReader } from './readcache.js';
import { invalidField, isIntegerIn, type TFieldCheck } from './validation.js';

/**
 * Pages of admin lists. A page starts strictly after the position its cursor names, so documents
 * inserted or deleted between two pages never make an item appear twice or vanish (an item inserted
 * behind the cursor is simply not on the later pages). A cursor is opaque to
 * callers: base64url JSON naming the list it belongs to and its position, refused on any other list.
 *
 * A stored list (`findPage`) has one order, the same for the whole list and for its pages: its
 * `IListOrder` (a field such as the creation time, then the id). A list computed in memory
 * (`pageOf`) answers the whole list in its historical order and pages ordered by id.
 */

export const pageLimits = Object.freeze({ defaultLimit: 100, maxLimit: 1000 });

/** Largest cursor text accepted; a position is an id or a small record. */
const maxCursorLength = 2048;

/** Project's own definition: the page members every admin list accepts. */
export interface IPageRequest {
  limit?: number;
  cursor?: string;
}

/** Opaque cursor of `listArg` for `positionArg` (an id, or a list's own small record). */
export const encodePageCursor = (listArg: string, positionArg: unknown): string =>
  Buffer.from(JSON.stringify({ l: listArg, p: positionArg })).toString('base64url');

/** The position a cursor of `listArg` names, or undefined when it is not a cursor of that list this server handed out. */
export const decodePageCursor = (listArg: string, cursorArg: unknown): unknown => {
  if (typeof cursorArg !== 'string' || cursorArg.length === 0 || cursorArg.length > maxCursorLength) {
    return undefined;
  }
  try {
    const value = JSON.parse(Buffer.from(cursorArg, 'base64url').toString('utf8')) as unknown;
    if (!value || typeof value !== 'object' || Array.isArray(value)) {
      return undefined;
    }
    const record = value as Record<string, unknown>;
    return record.l === listArg && Object.hasOwn(record, 'p') ? record.p : undefined;
  } catch {
    return undefined;
  }
};

const decodeIdCursor = (listArg: string, cursorArg: unknown): string | undefined => {
  const position = decodePageCursor(listArg, cursorArg);
  return typeof position === 'string' && position.length > 0 && position.length <= 1024 ? position : undefined;
};

export const isPageLimit: TFieldCheck = isIntegerIn(1, pageLimits.maxLimit);

/** A cursor check for a list whose positions are ids. */
export const isPageCursorOf = (listArg: string, decodeArg: (cursorArg: unknown) => unknown = (cursorArg) => decodeIdCursor(listArg, cursorArg)): TFieldCheck =>
  (valueArg, pathArg) => decodeArg(valueArg) === undefined ? [invalidField(pathArg, `is not a cursor this server handed out`)] : [];

/** The `optional` shape members of a paged list: `limit` and `cursor`, checked by path. */
export const pageShape = (listArg: string): Record<string, TFieldCheck> => ({ limit: isPageLimit, cursor: isPageCursorOf(listArg) });

/** Whether the request asks for a page rather than the whole list. */
export const wantsPage = (requestArg: IPageRequest): boolean => requestArg.limit !== undefined || requestArg.cursor !== undefined;

export interface IPage<T> {
  items: T[];
  /** Present when there may be more items after this page. */
  nextCursor?: string;
}

/** The `nextCursor` member of an answer, absent when there is none. */
export const nextCursorMember = (pageArg: { nextCursor?: string }): { nextCursor?: string } =>
  pageArg.nextCursor === undefined ? {} : { nextCursor: pageArg.nextCursor };

/**
 * A page of a list computed in memory (`itemsArg` in its historical order). Without `limit` and
 * `cursor`, every item as given; otherwise ordered by id, after the cursor, at most `limit`.
 */
export const pageOf = <T>(listArg: string, itemsArg: readonly T[], idOfArg: (itemArg: T) => string, requestArg: IPageRequest): IPage<T> => {
  if (!wantsPage(requestArg)) {
    return { items: [...itemsArg] };
  }
  const after = requestArg.cursor === undefined ? undefined : decodeIdCursor(listArg, requestArg.cursor);
  const limit = requestArg.limit ?? pageLimits.defaultLimit;
  const ordered = itemsArg
    .filter((itemArg) => after === undefined || idOfArg(itemArg) > after)
    .sort((leftArg, rightArg) => (idOfArg(leftArg) < idOfArg(rightArg) ? -1 : idOfArg(leftArg) > idOfArg(rightArg) ? 1 : 0));
  const items = ordered.slice(0, limit);
  return ordered.length > limit ? { items, nextCursor: encodePageCursor(listArg, idOfArg(items[items.length - 1])) } : { items };
};

/** The one order of a stored list: a field, then the id, both in `direction`. */
export interface IListOrder {
  field: string;
  direction: 1 | -1;
}

/** Lists ordered by id alone (their documents have no creation time of their own). */
export const byId: IListOrder = Object.freeze({ field: 'id', direction: 1 });
/** Oldest first: the order of lists people read as "what exists". */
export const oldestFirst = (fieldArg: string): IListOrder => ({ field: fieldArg, direction: 1 });
/** Newest first: the order of logs (operations, audit). */
export const newestFirst = (fieldArg: string): IListOrder => ({ field: fieldArg, direction: -1 });

type TOrderValue = number | string;

/** A position in an ordered list: the id alone when ordered by id, else the field's value and the id. */
const decodeOrderedCursor = (listArg: string, orderArg: IListOrder, cursorArg: unknown): { value: TOrderValue; id: string } | undefined => {
  if (orderArg.field === 'id') {
    const id = decodeIdCursor(listArg, cursorArg);
    return id === undefined ? undefined : { value: id, id };
  }
  const position = decodePageCursor(listArg, cursorArg);
  if (!Array.isArray(position) || position.length !== 2) {
    return undefined;
  }
  const [value, id] = position as unknown[];
  const validValue = (typeof value === 'number' && Number.isFinite(value)) || (typeof value === 'string' && value.length <= 1024);
  return validValue && typeof id === 'string' && id.length > 0 && id.length <= 1024 ? { value: value as TOrderValue, id } : undefined;
};

/** The `pageShape` of a list with its own order: its cursors carry the order's position. */
export const orderedPageShape = (listArg: string, orderArg: IListOrder): Record<string, TFieldCheck> => ({
  limit: isPageLimit,
  cursor: isPageCursorOf(listArg, (cursorArg) => decodeOrderedCursor(listArg, orderArg, cursorArg)),
});

/**
 * A page of stored documents matching `filterArg`, read with one query, in the list's one order
 * (`orderArg`, ties broken by id): those strictly after the cursor's position, one more than the
 * limit to know whether there is more. Without `limit` and `cursor`, every matching document in
 * that same order. A document inserted while a caller pages lands either behind the cursor (newer
 * in a newest-first list: not on the later pages) or ahead of it (seen once); none is seen twice.
 */
export const findPage = async <T extends IStoredDocument>(
  storeArg: IListReader,
  kindArg: IDocumentKind<T>,
  filterArg: Filter<T>,
  listArg: string,
  requestArg: IPageRequest,
  orderArg: IListOrder = byId,
): Promise<IPage<T>> => {
  const sort: Record<string, 1 | -1> = orderArg.field === 'id' ? { id: orderArg.direction } : { [orderArg.field]: orderArg.direction, id: orderArg.direction };
  if (!wantsPage(requestArg)) {
    return { items: await storeArg.find(kindArg, filterArg, { sort }) };
  }
  const after = requestArg.cursor === undefined ? undefined : decodeOrderedCursor(listArg, orderArg, requestArg.cursor);
  const limit = requestArg.limit ?? pageLimits.defaultLimit;
  const beyond = orderArg.direction === 1 ? '$gt' : '$lt';
  const afterClause = after === undefined
    ? undefined
    : orderArg.field === 'id'
      ? { id: { [beyond]: after.id } }
      : { $or: [{ [orderArg.field]: { [beyond]: after.value } }, { [orderArg.field]: after.value, id: { [beyond]: after.id } }] };
  const filter = afterClause === undefined ? filterArg : ({ $and: [filterArg, afterClause] } as Filter<T>);
  const docs = await storeArg.find(kindArg, filter, { sort, limit: limit + 1 });
  const items = docs.slice(0, limit);
  if (docs.length <= limit) {
    return { items };
  }
  const last = items[items.length - 1];
  const position = orderArg.field === 'id' ? last.id : [(last as unknown as Record<string, TOrderValue>)[orderArg.field], last.id];
  return { items, nextCursor: encodePageCursor(listArg, position) };
};
