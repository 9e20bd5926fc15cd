/**
 * What every list command shares: the page it asks for, the cursor of the
 * next page (`nextCursor` in `--json`, `null` on the last page), and the
 * footer that tells a person more rows exist and how to see them.
 */
import { type Command, InvalidArgumentError } from "commander"
import { Either, ParseResult, Schema } from "effect"
import { Limit, MAX_LIMIT, toPage } from "../src/http/Pagination.ts"
import type { Page } from "../src/Page.ts"

export interface PageFlags {
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
  readonly oldest?: boolean | undefined
}

const decodeLimit = Schema.decodeUnknownEither(Limit)

/** `--limit`, decoded by the API's own `limit` schema: a whole number of at least 1; above the maximum is clamped. */
export const limitFlag = (value: string): number => {
  const decoded = decodeLimit(value.trim())
  if (Either.isRight(decoded)) return decoded.right
  const [issue] = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
  throw new InvalidArgumentError(`${issue?.message.startsWith("must") ? issue.message : "must be a whole number"}`)
}

/** The `--limit` option of every list, with the API's rule. */
export const limitOption = ["--limit <n>", `rows per page: a whole number of at least 1 (default 50; above ${MAX_LIMIT}, ${MAX_LIMIT})`, limitFlag] as const

/** `--oldest` on lists shown newest first (signals, usage, deliveries, invoices). */
export const withOldest = (command: Command) =>
  command.option("--oldest", "oldest first (default: newest first); --cursor then pages towards newer rows")

/** The page of a newest-first list: newest first unless `--oldest`. */
export const newestFirstPage = (options: PageFlags): Page => ({ ...toPage(options), newestFirst: !options.oldest })

/**
 * The cursor of the page after `rows`, or null when `rows` is the last page.
 * A page shorter than its limit is the last one (the spec's rule); a full page
 * may be followed by an empty one, which is the price of not counting rows.
 */
export const nextCursorOf = (rows: ReadonlyArray<{ readonly id: string }>, options: PageFlags): string | null =>
  rows.length > 0 && rows.length >= toPage(options).limit ? rows[rows.length - 1]!.id : null

/** `12 signal(s)`, and when more exist, how to get them. */
export const listFooter = (count: string, rows: ReadonlyArray<{ readonly id: string }>, options: PageFlags): string => {
  const next = nextCursorOf(rows, options)
  return next === null ? count : `${count}; more rows: repeat with --cursor ${next}`
}
