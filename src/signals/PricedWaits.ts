/**
 * Waiting for a queued signal's end: what `Prefer: wait=N` on the queued
 * signal routes answers with (docs/api.md "Waiting for the price").
 *
 * The worker announces the signals each batch ended (priced, refused or held
 * PENDING) once the batch has committed, with one `pg_notify` on
 * `signalsPricedChannel` whose payload lists their rawIds (or `*` when they
 * do not fit in a notification). An API process with requests waiting
 * listens on that channel (src/db/Listen.ts) and, when a notification names
 * signals it waits for, reads their ends in one statement (all of its waiting
 * signals' when the payload is `*`). It also reads a signal's end when a
 * request starts waiting for it (it may have been priced before the listener
 * saw it), and polls all of them while requests wait:
 * every `listeningPollMs` while the listener is proved to work (a notification
 * lost with its connection), every `pollingMs` while it is not (the embedded
 * database, a pooler without LISTEN, a reconnection).
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Option, Schema } from "effect"
import { type ChannelState, forkListener, listenOn } from "../db/Listen.ts"
import { findAll } from "../db/Sql.ts"
import type { OrganizationId } from "../ids.ts"
import { UsageLog } from "../usage/UsageLog.ts"
import { toEntry, type UsageLogEntry } from "../usage/UsageLogEntry.ts"

/** Notified by the worker after each batch commits: the rawIds it ended, comma-separated, or `*`. */
export const signalsPricedChannel = "billing_signals_priced"

/** Everything the worker ended; what a payload too long for a notification says instead. */
const allEnded = "*"

/** PostgreSQL refuses a payload of 8,000 bytes or more. */
const maxPayload = 7_900

/** How often waiting requests' signals are read while the listener works: a safety net for a lost notification. */
const listeningPollMs = 1_000

/** How often they are read while notifications do not reach this process. */
const pollingMs = 50

/**
 * Tells the API processes that the signals `rawIds` ended (their batch
 * committed). Outside the batch's transaction and after it: a failure here
 * only delays the waiting requests until their poll, so it is logged and
 * dropped.
 */
export const announceEnded = (sql: SqlClient.SqlClient, rawIds: ReadonlyArray<string>) => {
  if (rawIds.length === 0) return Effect.void
  const joined = rawIds.join(",")
  const payload = joined.length <= maxPayload ? joined : allEnded
  return sql`SELECT pg_notify(${signalsPricedChannel}, ${payload})`.pipe(
    Effect.asVoid,
    Effect.catchAllCause((cause) => Effect.logDebug("could not announce the signals a batch ended", cause))
  )
}

/** How a queued signal ended, as far as a waiting request is told. */
export type SignalEnd =
  /** Priced: its usage-log row. */
  | { readonly _tag: "Priced"; readonly usageLog: UsageLogEntry }
  /** Refused by the worker (FAILED): the status, code and message it recorded. */
  | { readonly _tag: "Refused"; readonly status: number; readonly code: string; readonly message: string }
  /** Held PENDING (no active customer holds its externalId yet): accepted, not priced. */
  | { readonly _tag: "Held" }

const EndedRow = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  status: Schema.String,
  errorStatus: Schema.NullOr(Schema.Number),
  errorCode: Schema.NullOr(Schema.String),
  errorMessage: Schema.NullOr(Schema.String),
  usageLogId: Schema.NullOr(Schema.String)
})

interface Waiter {
  readonly organizationId: OrganizationId
  readonly rawId: string
  readonly resume: (end: SignalEnd) => void
}

const keyOf = (organizationId: string, rawId: string) => `${organizationId}\u0000${rawId}`

export class PricedWaits extends Effect.Service<PricedWaits>()("PricedWaits", {
  dependencies: [UsageLog.Default],
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    const usage = yield* UsageLog
    const scope = yield* Effect.scope

    /** Waiting requests by `org\0rawId`; `waitedIds` their rawIds, to judge a notification without a statement. */
    const waiters = new Map<string, Set<Waiter>>()
    const waitedIds = new Map<string, number>()
    let state: ChannelState | "off" = "off"
    let checks = 0

    /**
     * What the reader reads next: every waiting signal (`allDue`: a poll, a
     * notification too long to name them, a reconnection) or those named
     * (`dueIds`: a notification, a request that starts waiting). Reading only
     * the named ones keeps a notification's cost to its own signals however
     * many requests wait. `kick` resumes the reader if it sleeps.
     */
    let allDue = false
    const dueIds = new Set<string>()
    let kick: (() => void) | undefined
    const wakeReader = () => {
      const resume = kick
      kick = undefined
      resume?.()
    }
    const readAll = () => {
      allDue = true
      wakeReader()
    }
    const readSome = (rawId: string) => {
      dueIds.add(rawId)
      wakeReader()
    }

    const onPayload = (payload: string) => {
      if (waiters.size === 0) return
      if (payload === allEnded) return readAll()
      for (const id of payload.split(",")) if (waitedIds.has(id)) readSome(id)
    }

    const onState = (next: ChannelState) => {
      // Notifications may have been missed before (re)connecting: read once.
      if (next === "listening" && state !== "listening") readAll()
      state = next
    }

    /** The ends of the signals requests wait for (all, or those due), each handed to its waiters. */
    const readEnds = (all: boolean, ids: ReadonlySet<string>) => Effect.gen(function*() {
      const waited = [...waiters.values()].map((set) => set.values().next().value!)
        .filter((waiter) => all || ids.has(waiter.rawId))
      if (waited.length === 0) return
      checks++
      const rows = yield* findAll(
        EndedRow,
        sql`SELECT organization_id, id, status, error_status, error_code, error_message, usage_log_id FROM signals
            WHERE (organization_id, id) IN (
              SELECT * FROM unnest(${waited.map((w) => w.organizationId)}::text[], ${waited.map((w) => w.rawId)}::text[]))
              AND status <> 'QUEUED'`
      )
      const priced = new Map<string, Array<string>>()
      for (const row of rows) {
        if (row.status === "PROCESSED" && row.usageLogId !== null) {
          priced.set(row.organizationId, [...priced.get(row.organizationId) ?? [], row.usageLogId])
        }
      }
      const entries = new Map<string, UsageLogEntry>()
      for (const [organizationId, ids] of priced) {
        const found = yield* usage.lookup(organizationId as OrganizationId, ids)
        for (const record of found.rows) entries.set(keyOf(organizationId, record.signalId), toEntry(record))
      }
      for (const row of rows) {
        const key = keyOf(row.organizationId, row.id)
        let end: SignalEnd | undefined
        if (row.status === "PROCESSED") {
          const entry = entries.get(key)
          if (entry !== undefined) end = { _tag: "Priced", usageLog: entry }
        } else if (row.status === "FAILED") {
          end = {
            _tag: "Refused",
            status: row.errorStatus ?? 500,
            code: row.errorCode ?? "internal_error",
            message: row.errorMessage ?? "The signal was refused"
          }
        } else if (row.status === "PENDING") {
          end = { _tag: "Held" }
        }
        if (end === undefined) continue
        for (const waiter of [...waiters.get(key) ?? []]) waiter.resume(end)
      }
    }).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("could not read the ends of waited-for signals; trying again", cause))
    )

    const sleepUntilDue = Effect.suspend(() => {
      if (allDue || dueIds.size > 0) return Effect.void
      const kicked = Effect.async<void>((resume) => {
        kick = () => resume(Effect.void)
        return Effect.sync(() => {
          kick = undefined
        })
      })
      // Nobody waits: sleep until somebody does. Otherwise the poll, slower while notifications arrive.
      const poll = Effect.sleep(state === "listening" ? listeningPollMs : pollingMs).pipe(Effect.tap(() => {
        allDue = true
      }))
      return waiters.size === 0 ? kicked : Effect.raceFirst(kicked, poll)
    })

    const reader = Effect.forever(
      Effect.zipRight(
        sleepUntilDue,
        Effect.suspend(() => {
          const all = allDue
          const ids = new Set(dueIds)
          allDue = false
          dueIds.clear()
          return readEnds(all, ids)
        })
      )
    )

    let started = false
    const start = Effect.suspend(() => {
      if (started) return Effect.void
      started = true
      return Effect.zipRight(
        Effect.forkIn(reader, scope),
        Option.isSome(pg) ? forkListener(listenOn(pg.value, sql, signalsPricedChannel, onPayload, onState), scope) : Effect.void
      )
    })

    const add = (waiter: Waiter) => {
      const key = keyOf(waiter.organizationId, waiter.rawId)
      let set = waiters.get(key)
      if (set === undefined) waiters.set(key, set = new Set())
      set.add(waiter)
      waitedIds.set(waiter.rawId, (waitedIds.get(waiter.rawId) ?? 0) + 1)
    }

    const remove = (waiter: Waiter) => {
      const key = keyOf(waiter.organizationId, waiter.rawId)
      const set = waiters.get(key)
      if (set === undefined || !set.delete(waiter)) return
      if (set.size === 0) waiters.delete(key)
      const count = (waitedIds.get(waiter.rawId) ?? 1) - 1
      if (count === 0) waitedIds.delete(waiter.rawId)
      else waitedIds.set(waiter.rawId, count)
    }

    /**
     * How the signal `rawId` of `organizationId` ended, once the worker has
     * committed its end; none when it has not within `timeoutMs`.
     */
    const awaitEnd = (organizationId: OrganizationId, rawId: string, timeoutMs: number) =>
      Effect.zipRight(
        start,
        Effect.async<SignalEnd>((resume) => {
          const waiter: Waiter = {
            organizationId,
            rawId,
            resume: (end) => {
              remove(waiter)
              resume(Effect.succeed(end))
            }
          }
          add(waiter)
          // Its end may have been committed (and announced) before it waited.
          readSome(rawId)
          return Effect.sync(() => remove(waiter))
        })
      ).pipe(Effect.timeoutTo({ duration: timeoutMs, onTimeout: Option.none, onSuccess: Option.some }))

    const stats = Effect.sync(() => ({ listener: state, waiting: waiters.size, checks }))

    return { awaitEnd, stats } as const
  })
}) {}
