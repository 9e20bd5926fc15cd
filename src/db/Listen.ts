/**
 * Listening on a PostgreSQL channel, with proof that it works, for every
 * listener of the service: the API key cache's (src/organizations/KeyCache.ts
 * `listenForKeyChanges`), the worker's wake (src/signals/QueueWake.ts) and the
 * API's priced waits (src/signals/PricedWaits.ts).
 *
 * The listening connection is our own (`listeningConnection`), not
 * `PgClient.listen`'s: @effect/sql-pg 0.53 swallows that connection's errors
 * (it stays silent forever once dropped), drops empty payloads, and leaves the
 * connection open when the listener is interrupted while it connects (its
 * socket then kept a `billing worker` stopped by SIGTERM from exiting). Ours is
 * ended whenever its session ends, however it ends. Still, a listener is only
 * trusted once a `pg_notify` sent through the pool has come back on the
 * listening connection (`listening`), and again every heartbeat; an echo that
 * does not come back ends the session and it reconnects. On the
 * embedded database the echo never comes back (its socket serves one PGlite
 * session to every client): the state is `unavailable`, and callers keep
 * polling. `PgClient.notify` is not used: it sends `NOTIFY chan, $1`, which
 * PostgreSQL rejects (a NOTIFY payload must be a literal); `SELECT
 * pg_notify(chan, payload)` is.
 */
import type { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import type { PgClient } from "@effect/sql-pg"
import { Cause, Data, Deferred, Duration, Effect, Fiber, Option, Redacted, Scope } from "effect"
import Pg from "pg"
import { randomToken } from "../ids.ts"
import { clientFor } from "./HostRouting.ts"

/**
 * `connecting` until an echo has come back, `listening` while they do,
 * `unavailable` when they did not (the embedded database, a pooler without
 * LISTEN): notifications may be missed, so poll.
 */
export type ChannelState = "connecting" | "listening" | "unavailable"

export interface ChannelOptions {
  /** How often the listener proves that notifications still arrive. */
  readonly heartbeat: Duration.DurationInput
  /** How long an echo may take before the listener counts as lost. */
  readonly echoTimeout: Duration.DurationInput
  /** How often an echo is re-sent while waiting (the first may precede LISTEN). */
  readonly echoResend: Duration.DurationInput
  /** The wait before trying again after notifications did not come back at all. */
  readonly unavailableRetry: Duration.DurationInput
  /** The longest wait between connection attempts. */
  readonly maxBackoff: Duration.DurationInput
}

export const defaultChannelOptions: ChannelOptions = {
  heartbeat: "5 seconds",
  echoTimeout: "2 seconds",
  echoResend: "200 millis",
  unavailableRetry: "60 seconds",
  maxBackoff: "30 seconds"
}

class EchoTimeout extends Data.TaggedError("EchoTimeout")<{ readonly message: string }> {}

/** Payloads beginning so are a listener's own echoes, never handed to `onPayload`. */
export const echoPayloadPrefix = "echo:"

/**
 * Listens on `channel` for as long as it runs (fork it; it never ends by
 * itself): every payload but the echoes goes to `onPayload`, every change of
 * state to `onState`. Whenever the state becomes `listening` (the first time
 * and after each reconnection) notifications may have been missed before it:
 * the caller looks for itself then.
 */
export const listenOn = (
  pg: PgClient.PgClient,
  sql: SqlClient.SqlClient,
  channel: string,
  onPayload: (payload: string) => void,
  onState: (state: ChannelState) => void,
  options: ChannelOptions = defaultChannelOptions
): Effect.Effect<never> =>
  Effect.gen(function*() {
    const echoPrefix = `${echoPayloadPrefix}${randomToken(10)}:`
    let echoed = 0
    let sent = 0
    let waiting: { readonly after: number; readonly arrived: Deferred.Deferred<void> } | undefined

    const received = (payload: string) => {
      if (payload.startsWith(echoPrefix)) {
        const n = Number(payload.slice(echoPrefix.length))
        if (Number.isInteger(n)) echoed = Math.max(echoed, n)
        if (waiting !== undefined && echoed > waiting.after) Deferred.unsafeDone(waiting.arrived, Effect.void)
      } else if (!payload.startsWith(echoPayloadPrefix)) {
        onPayload(payload)
      }
    }

    const sendEcho = Effect.suspend(() => {
      sent++
      return sql`SELECT pg_notify(${channel}, ${echoPrefix + sent})`
    })

    const echoRound = Effect.gen(function*() {
      const arrived = yield* Deferred.make<void>()
      waiting = { after: sent, arrived }
      yield* Effect.raceFirst(
        Deferred.await(arrived),
        Effect.zipRight(sendEcho, Effect.forever(Effect.zipRight(Effect.sleep(options.echoResend), sendEcho)))
      ).pipe(
        Effect.timeoutFail({
          duration: options.echoTimeout,
          onTimeout: () => new EchoTimeout({ message: "a notification sent through the pool did not come back on the listening connection" })
        }),
        Effect.ensuring(Effect.sync(() => {
          waiting = undefined
        }))
      )
    })

    let confirmed = false
    const session = Effect.scoped(Effect.gen(function*() {
      confirmed = false
      onState("connecting")
      const ended = yield* listeningConnection(pg.config, channel, received)
      const streamEnded = Effect.flatMap(Deferred.await(ended), () => Effect.dieMessage("the listening connection ended"))
      const beats = Effect.gen(function*() {
        yield* echoRound
        confirmed = true
        onState("listening")
        for (;;) {
          yield* Effect.sleep(options.heartbeat)
          yield* echoRound
        }
      })
      return yield* Effect.raceFirst(beats, streamEnded)
    }))

    let failures = 0
    let toldUnavailable = false
    for (;;) {
      const exit = yield* Effect.exit(session)
      const cause = exit._tag === "Failure" ? exit.cause : Cause.empty
      const echoLost = Option.exists(Cause.failureOption(cause), (error) => error instanceof EchoTimeout)
      let wait: Duration.DurationInput
      if (confirmed) {
        failures = 0
        onState("connecting")
        yield* Effect.logWarning(`lost the listener on ${channel}; reconnecting (polling meanwhile)`, cause)
        wait = "100 millis"
      } else if (echoLost) {
        onState("unavailable")
        if (!toldUnavailable) {
          toldUnavailable = true
          yield* Effect.logInfo(
            `notifications on ${channel} do not reach this process (the embedded database, or a pooler without LISTEN); polling instead`
          )
        }
        wait = options.unavailableRetry
      } else {
        failures++
        onState("unavailable")
        if (failures === 1) yield* Effect.logWarning(`cannot listen on ${channel}; retrying (polling meanwhile)`, cause)
        wait = Duration.min(Duration.times(Duration.millis(250), 2 ** Math.min(failures, 10)), Duration.decode(options.maxBackoff))
      }
      yield* Effect.sleep(wait)
    }
  })

/** A `pg` client's settings from the SQL client's: the same server, database, user and application name. */
const clientConfigOf = (config: PgClient.PgClientConfig): Pg.ClientConfig => ({
  ...(config.url !== undefined ? { connectionString: Redacted.value(config.url) } : {}),
  host: config.host,
  port: config.port,
  database: config.database,
  user: config.username,
  ...(config.password !== undefined ? { password: Redacted.value(config.password) } : {}),
  ...(config.ssl !== undefined ? { ssl: config.ssl } : {}),
  ...(config.applicationName !== undefined ? { application_name: config.applicationName } : {})
})

/**
 * A connection of its own listening on `channel` for as long as the scope
 * lasts, every payload to `onPayload`; the deferred completes when the
 * connection ends or fails (the caller reconnects). The connection is ended
 * when the scope closes, and at once when the fiber is interrupted while it
 * is still connecting.
 */
const listeningConnection = (
  config: PgClient.PgClientConfig,
  channel: string,
  onPayload: (payload: string) => void
): Effect.Effect<Deferred.Deferred<void>, SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const ended = yield* Deferred.make<void>()
    const end = (client: Pg.Client) =>
      Effect.sync(() => {
        client.end().catch(() => {})
      })
    yield* Effect.acquireRelease(
      Effect.interruptible(Effect.async<Pg.Client, SqlError>((resume) => {
        const client = clientFor(clientConfigOf(config))
        client.on("error", () => Deferred.unsafeDone(ended, Effect.void))
        client.on("end", () => Deferred.unsafeDone(ended, Effect.void))
        client.on("notification", (message) => {
          if (message.channel === channel) onPayload(message.payload ?? "")
        })
        client.connect()
          .then(() => client.query(`LISTEN ${Pg.escapeIdentifier(channel)}`))
          .then(
            () => resume(Effect.succeed(client)),
            (cause) => {
              client.end().catch(() => {})
              resume(Effect.fail(new SqlError({ cause, message: `Failed to listen on ${channel}` })))
            }
          )
        return end(client)
      })),
      end
    )
    return ended
  })

/**
 * Runs a listener (`listenOn`) until `scope` closes, which interrupts it and
 * waits for its connection to be ended (at most `listenerStopWait`, so a
 * database that does not answer cannot hang the close).
 */
export const forkListener = (listener: Effect.Effect<never>, scope: Scope.Scope): Effect.Effect<void> =>
  Effect.flatMap(
    Effect.forkDaemon(listener),
    (fiber) => Scope.addFinalizer(scope, Effect.timeoutOption(Fiber.interrupt(fiber), listenerStopWait))
  )

/** How long closing a listener's scope waits for the listener to stop. */
const listenerStopWait = Duration.seconds(3)
