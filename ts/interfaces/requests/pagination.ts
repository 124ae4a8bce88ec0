/**
 * Project's own definition: the page members every admin list accepts and answers
 * (docs/api-dashboard.md). `limit` is 1–1,000; without `limit` and `cursor` a list answers every
 * item as it always did; with either, a page of at most `limit` (default 100) items ordered by id.
 * `nextCursor` is present when there may be more: pass it back as `cursor`.
 */
export interface IPageRequest {
  limit?: number;
  cursor?: string;
}

export interface IPageAnswer {
  nextCursor?: string;
}
