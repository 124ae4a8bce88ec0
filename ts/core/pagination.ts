import type { Filter } from 'mongodb';
import type { IDocumentKind, IStoredDocument } from './store.js';
import type { IListReader } from './readcache.js';
import { invalidField, type TFieldCheck } from './validation.js';

/**
 * Pages of admin lists. A page is ordered by id and starts strictly after the id its cursor names,
 * so documents inserted or deleted between two pages never make an item appear twice or vanish
 * (an item inserted behind the cursor is simply not on the later pages). A cursor is opaque to
 * callers: base64url JSON naming the list it belongs to and its position, refused on any other list.
 *
 * A call with neither `limit` nor `cursor` answers the whole list in the list's historical order,
 * as before pagination existed; a call with either one answers a page ordered by id.
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

export const isPageLimit: TFieldCheck = (valueArg, pathArg) =>
  Number.isSafeInteger(valueArg) && (valueArg as number) >= 1 && (valueArg as number) <= pageLimits.maxLimit
    ? []
    : [invalidField(pathArg, `must be an integer from 1 to ${pageLimits.maxLimit}`)];

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

/**
 * A page of stored documents matching `filterArg`, read with one query: ids after the cursor,
 * ordered by id, one more than the limit to know whether there is more. Without `limit` and
 * `cursor`, every matching document in `wholeListSortArg` order.
 */
export const findPage = async <T extends IStoredDocument>(
  storeArg: IListReader,
  kindArg: IDocumentKind<T>,
  filterArg: Filter<T>,
  listArg: string,
  requestArg: IPageRequest,
  wholeListSortArg: Record<string, 1 | -1> = { id: 1 },
): Promise<IPage<T>> => {
  if (!wantsPage(requestArg)) {
    return { items: await storeArg.find(kindArg, filterArg, { sort: wholeListSortArg }) };
  }
  const after = requestArg.cursor === undefined ? undefined : decodeIdCursor(listArg, requestArg.cursor);
  const limit = requestArg.limit ?? pageLimits.defaultLimit;
  const filter = after === undefined ? filterArg : ({ $and: [filterArg, { id: { $gt: after } }] } as Filter<T>);
  const docs = await storeArg.find(kindArg, filter, { sort: { id: 1 }, limit: limit + 1 });
  const items = docs.slice(0, limit);
  return docs.length > limit ? { items, nextCursor: encodePageCursor(listArg, items[items.length - 1].id) } : { items };
};
