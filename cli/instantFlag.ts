import { Effect } from "effect"
import { BadRequest } from "../src/http/ApiErrors.ts"

/**
 * An `--now`/`--since`/`--until` flag: an ISO 8601 instant, or undefined when
 * not given. Its own module, so `cycle run` and `webhook` do not load the
 * worker command (and through it every service).
 */
export const parseInstant = (value: string | undefined) => {
  if (value === undefined) return Effect.succeed(undefined)
  const date = new Date(value)
  return Number.isNaN(date.getTime())
    ? Effect.fail(new BadRequest({ message: `--now: not an ISO 8601 instant: ${value}` }))
    : Effect.succeed(date)
}
