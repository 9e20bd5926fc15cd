/**
 * Listening on a PostgreSQL channel, with proof that it works: the same
 * echo-and-reconnect discipline as the API key cache's listener
 * (src/organizations/KeyCache.ts, `listenForKeyChanges`), for any channel.
 *
 * `PgClient.listen` (a dedicated connection) stays silent forever when its
 * connection drops (@effect/sql-pg 0.53 swallows the connection's errors), so
 * a listener is only trusted once a `pg_notify` sent through the pool has come
 * back on the listening connection (`listening`), and again every heartbeat;
 * an echo that does not come back ends the session and it reconnects. On the
 * embedded database the echo never comes back (its socket serves one PGlite
 * session to every client): the state is `unavailable`, and callers keep
 * polling. `PgClient.notify` is not used: it sends `NOTIFY chan, $1`, which
 * PostgreSQL rejects (a NOTIFY payload must be a literal); `SELECT
 * pg_notify(chan, payload)` is.
 */
import type { SqlClient } from "@effect/sql"
import type { PgClient } from "@effect/sql-pg"
import { Cause, Data, Deferred, Duration, Effect, Fiber, Option, Scope, Stream } from "effect"
import { randomToken } from "../ids.ts"

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
      const stream = yield* pg.listen(channel).pipe(
        Stream.runForEach((payload) => Effect.sync(() => received(payload))),
        Effect.forkScoped
      )
      const streamEnded = Effect.flatMap(Fiber.join(stream), () => Effect.dieMessage("the notification stream ended"))
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

/**
 * Runs a listener (`listenOn`) until `scope` closes, without the close
 * waiting for it to stop. Interrupting a listener whose connection is still
 * being set up can wait on the driver (the stream's `UNLISTEN` finalizer is an
 * uninterruptible query on that connection): a `billing worker` stopped by
 * SIGTERM just as it went idle did not exit. The listener is interrupted as
 * the scope closes; its connection ends with the client's (PgClient's own
 * finalizer, with its time-out).
 */
export const forkListener = (listener: Effect.Effect<never>, scope: Scope.Scope): Effect.Effect<void> =>
  Effect.flatMap(Effect.forkDaemon(listener), (fiber) => Scope.addFinalizer(scope, Fiber.interruptFork(fiber)))
