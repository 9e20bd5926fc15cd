/**
 * Waking the worker when signals are queued, instead of waiting for its next
 * poll (docs/signals.md "The wake").
 *
 * Every inbox write that queues a signal notifies `signalsQueuedChannel` once
 * per statement (src/signals/InboxInsert.ts: the notification is part of the
 * insert itself, so it costs no round trip and is delivered when the rows
 * commit). A looping worker listens on it (src/db/Listen.ts): between drains
 * it sleeps until a notification arrives or its poll interval
 * (`BILLING_WORKER_POLL_MS`) passes, whichever is first. The poll stays as the
 * fallback: a worker whose listener is down (a lost connection, the embedded
 * database) still prices everything, only later.
 */
import type { SqlClient } from "@effect/sql"
import type { PgClient } from "@effect/sql-pg"
import { type Duration, Effect, Option } from "effect"
import { type ChannelState, forkListener, listenOn } from "../db/Listen.ts"

/** Notified by every statement that queues signals. */
export const signalsQueuedChannel = "billing_signals_queued"

/**
 * Its payload. Not empty: `PgClient.listen` (@effect/sql-pg 0.53) drops a
 * notification whose payload is empty, so an empty one would never wake.
 */
export const queuedPayload = "queued"

export interface QueueWake {
  /**
   * Sleeps `idle`, or less: until signals are queued. Returns at once when
   * some were queued since the last call began (a drain may have missed
   * them). The first call starts the listener, so only a looping worker holds
   * a listening connection.
   */
  readonly awaitWork: (idle: Duration.DurationInput) => Effect.Effect<void>
  /** The listener's state ("off" before the first wait), for tests and diagnostics. */
  readonly state: () => ChannelState | "off"
  /** Wakes received since the process started. */
  readonly wakes: () => number
}

/**
 * The wake of a worker on `pg` (none on a client that cannot listen: the
 * poll alone). Forks its listener into the current scope on first use.
 */
export const makeQueueWake = (sql: SqlClient.SqlClient, pg: Option.Option<PgClient.PgClient>) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    let state: ChannelState | "off" = "off"
    let woken = false
    let wakes = 0
    let sleeper: (() => void) | undefined

    const wake = () => {
      wakes++
      woken = true
      const resume = sleeper
      sleeper = undefined
      resume?.()
    }

    const onState = (next: ChannelState) => {
      // A listener that (re)connects may have missed notifications: drain once.
      if (next === "listening" && state !== "listening") wake()
      state = next
    }

    const startListener = Effect.suspend(() =>
      Option.isNone(pg) || state !== "off"
        ? Effect.void
        : Effect.zipRight(
          Effect.sync(() => {
            state = "connecting"
          }),
          forkListener(listenOn(pg.value, sql, signalsQueuedChannel, wake, onState), scope)
        )
    )

    const notified = Effect.async<void>((resume) => {
      sleeper = () => resume(Effect.void)
      return Effect.sync(() => {
        sleeper = undefined
      })
    })

    const awaitWork = (idle: Duration.DurationInput) =>
      Effect.zipRight(
        startListener,
        Effect.suspend(() => {
          if (woken) {
            woken = false
            return Effect.void
          }
          return Effect.ensuring(
            Effect.raceFirst(Effect.sleep(idle), notified),
            Effect.sync(() => {
              woken = false
            })
          )
        })
      )

    return { awaitWork, state: () => state, wakes: () => wakes } satisfies QueueWake
  })
