/**
 * A page of a list, as services take it: at most `limit` rows after the row
 * whose id is `cursor`. The API edge (src/http/Pagination.ts) decodes and
 * clamps it from the query string.
 */
export const DEFAULT_LIMIT = 50
export const MAX_LIMIT = 200

export interface Page {
  readonly limit: number
  readonly cursor: string | undefined
  /**
   * Newest first: the cursor then pages towards older rows. The API lists
   * oldest first (the spec's order); the CLI shows the newest first where
   * people look for recent things (signals, usage, invoices), `--oldest` flips.
   */
  readonly newestFirst?: boolean | undefined
}

/** The list query of every catalogue resource: a page, and `active` to filter on. */
export interface CatalogueListQuery {
  readonly page: Page
  readonly active?: boolean | undefined
}
