/**
 * Waiting for work another worker holds. A batch that claims nothing (its
 * rows are locked by another worker's transaction, `SKIP LOCKED`) is not the
 * end of the work while some is still left: a `--once` run that reported idle
 * then would stop with work undone. So a job waits for the holder to commit
 * and tries again.
 */
import { Effect } from "effect"

/**
 * Runs `batch`; while it handles nothing and `workLeft` says some remains,
 * sleeps `stepMs` and runs it again, for at most `maxWaitMs` of sleeping in
 * all (no limit when omitted). What the last batch handled: more than 0, or 0
 * when nothing is left (or the wait ran out).
 */
export const waitForHeldWork = <R1, R2>(
  batch: Effect.Effect<number, never, R1>,
  workLeft: Effect.Effect<boolean, never, R2>,
  options: { readonly stepMs: number; readonly maxWaitMs?: number }
): Effect.Effect<number, never, R1 | R2> => {
  const attempt = (waited: number): Effect.Effect<number, never, R1 | R2> =>
    Effect.flatMap(batch, (handled) =>
      handled > 0 || (options.maxWaitMs !== undefined && waited >= options.maxWaitMs)
        ? Effect.succeed(handled)
        : Effect.flatMap(workLeft, (left) =>
          left
            ? Effect.zipRight(Effect.sleep(options.stepMs), Effect.suspend(() => attempt(waited + options.stepMs)))
            : Effect.succeed(0)))
  return attempt(0)
}
