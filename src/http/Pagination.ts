/**
 * Cursor pagination as the spec's Pagination section: `limit` defaults to 50,
 * values above 200 are clamped, `cursor` is the id of the previous page's last
 * row, and a page shorter than `limit` is the last one. Ids are time-ordered
 * (src/ids.ts), so "after the cursor" is "created after it".
 */
import { Schema } from "effect"
import { type CatalogueListQuery, DEFAULT_LIMIT, MAX_LIMIT, type Page } from "../Page.ts"

export { type CatalogueListQuery, DEFAULT_LIMIT, MAX_LIMIT, type Page }

/**
 * A page size as text, the one rule for every list: the API's `limit` query
 * parameter and the CLI's `--limit` (cli/lists.ts `limitFlag`) decode with it,
 * so `0` is refused by both (it listed nothing in the CLI, with exit code 0,
 * while the API answered 400).
 */
export const Limit = Schema.NumberFromString.pipe(
  Schema.int({ message: () => "must be a whole number" }),
  Schema.greaterThanOrEqualTo(1, { message: () => "must be at least 1" })
).annotations({
  // Values above the maximum are clamped, not refused: the document has no `maximum` because none is refused.
  jsonSchema: {
    type: "integer",
    minimum: 1,
    default: DEFAULT_LIMIT,
    description: `Rows per page: a whole number of at least 1, ${DEFAULT_LIMIT} by default; values above ` +
      `${MAX_LIMIT} are clamped to ${MAX_LIMIT}.`
  }
})

export const PageParams = {
  limit: Schema.optional(Limit),
  cursor: Schema.optional(Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))).annotations({
    description: "The id of the previous page's last row; the page starts after it. A cursor that names no row " +
      "of the list (malformed, another list's, unknown) is 400."
  })
}

/** `active=true|false` on catalogue lists. */
export const ActiveParam = {
  active: Schema.optional(
    Schema.Literal("true", "false").annotations({ message: () => "must be true or false" })
  ).annotations({ description: "`true`: active records only; `false`: archived ones only; left out: both." })
}

export const toPage = (params: { readonly limit?: number | undefined; readonly cursor?: string | undefined }): Page => ({
  limit: Math.min(params.limit ?? DEFAULT_LIMIT, MAX_LIMIT),
  cursor: params.cursor
})

/**
 * The list query of every catalogue route (credits, outcomes, units,
 * composites, plans): cursor pagination plus `active`. `active=true` lists
 * active records, `active=false` archived ones, and no `active` lists both.
 */
export const CatalogueListParams = Schema.Struct({ ...PageParams, ...ActiveParam })

export const toCatalogueQuery = (params: typeof CatalogueListParams.Type): CatalogueListQuery => ({
  page: toPage(params),
  active: params.active === undefined ? undefined : params.active === "true"
})
