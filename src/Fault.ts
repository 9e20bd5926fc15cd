/**
 * Fault injection for crash tests: `BILLING_FAULT=<point>` makes the process
 * die (SIGKILL, as a machine failure would) when it reaches that point, e.g.
 * `signals.before-commit` after a batch is claimed and written but before it
 * commits. Unset, a fault point does nothing. Never set it in production.
 */
import { Effect } from "effect"

export const faultPoint = (point: string): Effect.Effect<void> =>
  Effect.sync(() => {
    if (process.env.BILLING_FAULT !== point) return
    process.kill(process.pid, "SIGKILL")
  })
