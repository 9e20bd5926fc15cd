/**
 * Spend control in real time (issue 26, parts 2 and 3).
 *
 * `check` answers whether a customer may spend now: the committed balance,
 * what its queued, not yet priced signals will take (`pending`, priced in
 * memory by the drain's own meters, SpendState.ts) and its active holds. A
 * check without `reserve` only reads: no transaction, no lock, no write.
 *
 * With `reserve`, an allowed check holds an amount of the balance until a
 * signal carrying its `reservationId` settles it (signals/Settlements.ts), it
 * is released, or it expires. Checks with `reserve` of one customer are
 * serialised by a transaction-scoped advisory lock taken before anything is
 * read, in the transaction that inserts the hold: the second of two racing
 * checks reads the first one's hold, so two agents racing for the last credit
 * cannot both be allowed.
 *
 * Reads come in an order that can only over-count when the drain commits
 * between them: queued signals, then holds, then balances. A signal priced in
 * between is then seen both queued and charged (the check is stricter for
 * that instant), never in neither.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Either, Exit, type Fiber, FiberId, FiberSet, Schema } from "effect"
import { constVoid } from "effect/Function"
import { makeCoalescer } from "../db/Coalesce.ts"
import { dieOnSqlError, findAll, orDie } from "../db/Sql.ts"
import { CustomerNotFound, ReservationNotFound } from "../errors.ts"
import { idOrder, makeId } from "../ids.ts"
import { type CustomerRef, type NamedCustomer, namedCustomer } from "../customers/Customer.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { toSql, ZERO } from "../money.ts"
import { Money, Timestamp } from "../schema.ts"
import { ClaimedSignal, type Customer, decodeSignal, type DecodedSignal, loadBatchContext, momentColumns } from "../signals/BatchContext.ts"
import { currentTime } from "../time.ts"
import type { SnapshotComponent } from "../pricing/PlanSnapshot.ts"
import {
  type CheckRequest,
  type CheckResult,
  type CustomerEntitlements,
  type Hold,
  type ReleaseResult
} from "./Entitlement.ts"
import { quickReadMany, type QuickRequest, type QuickState } from "./QuickRead.ts"
import { type ActiveHold, balanceKey, countedHolds, judge, type Judgement, simulateQueued } from "./SpendState.ts"

/**
 * The most queued signals of one customer a check prices. A customer further
 * behind than this has a worker that is not keeping up; the check then counts
 * the oldest MAX_QUEUED (and says so in docs/entitlements.md).
 */
export const MAX_QUEUED = 10_000

const CustomerRow = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  externalId: Schema.NullOr(Schema.String),
  archivedAt: Schema.NullOr(Timestamp)
})

const ActiveHoldRow = Schema.Struct({
  id: Schema.String,
  meter: Schema.Literal("CREDIT", "OUTCOME", "UNIT", "WALLET"),
  targetId: Schema.NullOr(Schema.String),
  amount: Money
})

const HoldRow = Schema.Struct({
  id: Schema.String,
  customerId: Schema.String,
  meter: Schema.Literal("CREDIT", "OUTCOME", "UNIT", "WALLET"),
  targetId: Schema.NullOr(Schema.String),
  amount: Money,
  status: Schema.Literal("HELD", "SETTLED", "RELEASED"),
  createdAt: Timestamp,
  expiresAt: Timestamp,
  endedAt: Schema.NullOr(Timestamp),
  signalId: Schema.NullOr(Schema.String),
  usageLogId: Schema.NullOr(Schema.String)
})
type HoldRow = typeof HoldRow.Type

const BalanceTotals = Schema.Struct({
  componentId: Schema.String,
  granted: Money,
  used: Money,
  remaining: Money
})

/** A HELD row whose time has passed is reported EXPIRED: it released itself. */
const holdOf = (row: HoldRow, now: Date): Hold => ({
  ...row,
  status: row.status === "HELD" && row.expiresAt.getTime() <= now.getTime() ? "EXPIRED" : row.status
})

/** Checks read together: at most this many in one statement, this many statements at once. */
const coalescing = { maxBatch: 64, lanes: 2 }

/** The route a probe of the check's meter takes, so the batch loader reads what that meter needs. */
const probeRoute = { CREDIT: "CREDIT", OUTCOME: "OUTCOME", UNIT: "UNIT", WALLET: "WALLET" } as const

export class Entitlements extends Effect.Service<Entitlements>()("Entitlements", {
  dependencies: [Ledger.Default],
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    // `checkNow` reads the time synchronously (the check lane calls it outside any fiber): this layer's Clock,
    // as Intake does.
    const clock = yield* Effect.clock
    // The checks `checkNow` cannot judge from its one read run as effects here, interrupted when the service closes.
    const runCheck = yield* FiberSet.makeRuntime<never>()
    // A check outside a transaction shares its statement with the checks that arrived while the last ones read.
    const coalescedRead = {
      ById: yield* makeCoalescer({ run: (batch: ReadonlyArray<QuickRequest>) => quickReadMany(sql, "ById", batch), ...coalescing }),
      ByExternalId: yield* makeCoalescer({
        run: (batch: ReadonlyArray<QuickRequest>) => quickReadMany(sql, "ByExternalId", batch),
        ...coalescing
      })
    }

    const notFoundOf = (named: NamedCustomer) =>
      new CustomerNotFound({
        message: named._tag === "ById"
          ? `Customer ${named.customerId} not found`
          : `No active customer has externalId ${named.externalId}`
      })

    const customerOf = (organizationId: string, ref: CustomerRef) =>
      Effect.gen(function*() {
        const named = yield* namedCustomer(ref)
        const rows = yield* findAll(
          CustomerRow,
          named._tag === "ById"
            ? sql`SELECT organization_id, id, external_id, archived_at FROM customers
                  WHERE organization_id = ${organizationId} AND id = ${named.customerId}`
            : sql`SELECT organization_id, id, external_id, archived_at FROM customers
                  WHERE organization_id = ${organizationId} AND external_id = ${named.externalId} AND archived_at IS NULL`
        )
        const found = rows[0]
        if (found === undefined) return yield* notFoundOf(named)
        return found
      })

    /**
     * The customer's queued signals under each of its keys (its id, and the
     * externalId it holds), in send order. One equality per key, as the
     * drain's claim reads them (signals_queued_by_customer): an `= ANY` of
     * both keys let the planner walk the organisation's whole signal table.
     */
    const queuedUnder = (organizationId: string, key: string) =>
      findAll(
        ClaimedSignal,
        sql`SELECT organization_id, id, message_id, route, customer_id, external_id, run_id, composite_ref,
                   composite_value, member, body, ${sql.literal(momentColumns)}
            FROM signals
            WHERE status = 'QUEUED' AND organization_id = ${organizationId}
              AND coalesce(customer_id, 'ext:' || external_id) = ${key}
            ORDER BY id LIMIT ${MAX_QUEUED}`
      )

    const queuedOf = (customer: Customer) =>
      Effect.map(
        Effect.all([
          queuedUnder(customer.organizationId, customer.id),
          customer.externalId === null ? Effect.succeed([]) : queuedUnder(customer.organizationId, `ext:${customer.externalId}`)
        ]),
        ([byId, byExternalId]) => {
          const records = [...byId, ...byExternalId].sort(idOrder).slice(0, MAX_QUEUED)
          const decoded: Array<DecodedSignal> = []
          for (const record of records) {
            try {
              decoded.push(decodeSignal(record))
            } catch {
              // A body that no longer decodes fails at the worker (500) and takes nothing.
            }
          }
          return decoded
        }
      )

    const activeHoldRowsOf = (organizationId: string, customerId: string, now: Date) =>
      findAll(
        ActiveHoldRow,
        sql`SELECT id, meter, target_id, amount FROM reservations
            WHERE organization_id = ${organizationId} AND customer_id = ${customerId} AND status = 'HELD'
              AND expires_at > ${now}`
      )

    /**
     * Everything a check reads, in the order that can only over-count (see
     * the module's comment), and the queued signals priced in memory.
     */
    const stateOf = (
      customer: Customer,
      probes: ReadonlyArray<DecodedSignal["body"]>,
      route: DecodedSignal["record"]["route"],
      now: Date
    ) =>
      Effect.gen(function*() {
        const queued = yield* queuedOf(customer)
        const holds: ReadonlyArray<ActiveHold> = yield* activeHoldRowsOf(customer.organizationId, customer.id, now)
        // The check's own request rides along as more signals, so its catalogue and models are read with the rest.
        const probeSignals = probes.map((probe): DecodedSignal => ({
          record: {
            organizationId: customer.organizationId,
            id: "check",
            messageId: "check",
            route,
            customerId: customer.id,
            externalId: null,
            runId: null,
            compositeRef: null,
            compositeValue: null,
            member: null,
            body: probe,
            moment: now,
            momentSource: "RECEIVED"
          },
          body: probe
        }))
        const context = yield* loadBatchContext(sql, ledger, [...queued, ...probeSignals], { lock: false })
        return { context, holds, simulated: simulateQueued(context, customer, queued) }
      })

    /** What a check's quick read asks for (QuickRead.ts). */
    const quickRequestOf = (organizationId: string, request: CheckRequest, named: NamedCustomer, now: Date): QuickRequest => ({
      organizationId,
      customer: named._tag === "ById" ? named.customerId : named.externalId,
      agentKey: request.agentKey,
      models: [request.usage?.model, request.reserve?.usage?.model].filter((model) => model !== undefined),
      now
    })

    /** The state of a customer with nothing queued, from its quick read alone. */
    const quickStateOf = (quick: QuickState) => ({
      context: quick.context,
      holds: quick.holds,
      simulated: simulateQueued(quick.context, quick.customer, [])
    })

    /** The state of a customer with queued signals: the batch loader over its queue, with the check's own usage. */
    const queuedStateOf = (request: CheckRequest, quick: QuickState, now: Date) => {
      const agentKey = request.agentKey === undefined ? {} : { agentKey: request.agentKey }
      // A hold priced from a usage of its own needs that model's rates read too.
      const probes = [
        { ...agentKey, ...(request.usage === undefined ? {} : { usage: request.usage }) },
        ...(request.reserve?.usage === undefined ? [] : [{ ...agentKey, usage: request.reserve.usage }])
      ]
      return stateOf(quick.customer, probes, probeRoute[request.meter], now)
    }

    /**
     * The state a check is judged on: one statement when the customer has no
     * queued signal (QuickRead.ts), else the batch loader over its queue.
     */
    const checkState = (organizationId: string, request: CheckRequest, now: Date) =>
      Effect.gen(function*() {
        const named = yield* namedCustomer(request)
        const quick = yield* coalescedRead[named._tag].read(quickRequestOf(organizationId, request, named, now))
        if (quick === undefined) return yield* notFoundOf(named)
        return quick.hasQueued ? yield* queuedStateOf(request, quick, now) : quickStateOf(quick)
      })

    /** A check without a hold, judged on `state`: its answer. */
    const verdictOf = (state: ReturnType<typeof quickStateOf>, request: CheckRequest) =>
      Either.map(
        judge(state.simulated, state.context, state.holds, request),
        (judgement) => resultOf(state.simulated.customer, request, judgement, null, null)
      )

    const answer = (organizationId: string, request: CheckRequest, withHold: boolean) =>
      Effect.gen(function*() {
        const now = yield* currentTime
        // Serialises this customer's checks with `reserve` until the hold commits (or the refusal ends the
        // transaction): a check reads after the lock, so it sees what a check that held it before committed.
        const lockHolds = (customerId: string) =>
          orDie(sql`SELECT pg_advisory_xact_lock(hashtext(${organizationId}), hashtext(${`reservations/${customerId}`}))`)
        let state
        if (withHold && request.customerId !== undefined) {
          // The id names the customer (it wins over an externalId): the lock first, then one read.
          yield* lockHolds(request.customerId)
          state = yield* checkState(organizationId, request, now)
        } else {
          state = yield* checkState(organizationId, request, now)
          if (withHold) {
            // Named by externalId: read to learn its id, lock, then read again.
            yield* lockHolds(state.simulated.customer.id)
            state = yield* checkState(organizationId, { ...request, customerId: state.simulated.customer.id }, now)
          }
        }
        const { context, holds, simulated } = state
        const customer = simulated.customer
        const judgement = yield* judge(simulated, context, holds, request)
        let holdId: string | null = null
        let expiresAt: Date | null = null
        if (withHold && judgement.allowed && judgement.holdAmount !== null && BigDecimal.isPositive(judgement.holdAmount)) {
          holdId = makeId("rsv")
          expiresAt = new Date(now.getTime() + request.reserve!.ttlSeconds * 1000)
          yield* orDie(sql`INSERT INTO reservations
              (organization_id, id, customer_id, meter, target_id, amount, status, created_at, expires_at)
            VALUES (${organizationId}, ${holdId}, ${customer.id}, ${request.meter}, ${judgement.targetId},
                    ${toSql(judgement.holdAmount)}, 'HELD', ${now}, ${expiresAt})`)
        }
        return resultOf(customer, request, judgement, holdId, expiresAt)
      })

    const resultOf = (
      customer: Customer,
      request: CheckRequest,
      judgement: Judgement,
      holdId: string | null,
      expiresAt: Date | null
    ): CheckResult => ({
      customerId: customer.id,
      meter: request.meter,
      allowed: judgement.allowed,
      reason: judgement.reason,
      remaining: judgement.remaining,
      pending: judgement.pending,
      held: judgement.held,
      estimatedCost: judgement.estimatedCost,
      reservationId: holdId,
      expiresAt
    })

    /** `POST /entitlements/check`: reads only, unless it asks for a hold (one transaction with the hold). */
    const check = Effect.fn("Entitlements.check")((organizationId: string, request: CheckRequest) =>
      request.reserve === undefined
        ? answer(organizationId, request, false)
        : sql.withTransaction(answer(organizationId, request, true)).pipe(dieOnSqlError)
    )
    type CheckError = Effect.Effect.Error<ReturnType<typeof check>>

    /**
     * `check` without a fiber of its own when it can be (the check lane's
     * door, as `Intake.accept` is the intake lane's): a check without
     * `reserve` whose customer has no queued signal is its quick read, by
     * callback (Coalesce.ts `unsafeRead`), judged in memory with the same
     * functions as `check`. A customer with queued signals has its queue
     * priced from that read, and a check with `reserve` runs as `check`, each
     * in a fiber of the service's. `answer` is called once; the returned
     * function withdraws the check (its client went away).
     */
    const checkNow = (
      organizationId: string,
      request: CheckRequest,
      answer: (exit: Exit.Exit<CheckResult, CheckError>) => void
    ): (() => void) => {
      const named = namedCustomer(request)
      if (Either.isLeft(named)) {
        answer(Exit.fail(named.left))
        return constVoid
      }
      let withdrawn = false
      const tell = (exit: Exit.Exit<CheckResult, CheckError>) => {
        if (!withdrawn) answer(exit)
      }
      let fiber: Fiber.RuntimeFiber<CheckResult, CheckError> | undefined
      const inFiber = (effect: Effect.Effect<CheckResult, CheckError>) => {
        fiber = runCheck(effect)
        fiber.addObserver(tell)
      }
      const withdrawFiber = () => {
        withdrawn = true
        fiber?.unsafeInterruptAsFork(FiberId.none)
      }
      if (request.reserve !== undefined) {
        inFiber(check(organizationId, request))
        return withdrawFiber
      }
      const now = new Date(clock.unsafeCurrentTimeMillis())
      const withdrawRead = coalescedRead[named.right._tag].unsafeRead(
        quickRequestOf(organizationId, request, named.right, now),
        (exit) => {
          if (Exit.isFailure(exit)) return tell(Exit.failCause(exit.cause))
          const quick = exit.value
          if (quick === undefined) return tell(Exit.fail(notFoundOf(named.right)))
          if (quick.hasQueued) {
            // Its queue priced from the read already made, not read again by `check`.
            return inFiber(
              Effect.flatMap(queuedStateOf(request, quick, now), (state) => verdictOf(state, request)).pipe(
                Effect.withSpan("Entitlements.check")
              )
            )
          }
          let verdict: Either.Either<CheckResult, CheckError>
          try {
            verdict = verdictOf(quickStateOf(quick), request)
          } catch (defect) {
            return tell(Exit.die(defect))
          }
          tell(Either.isLeft(verdict) ? Exit.fail(verdict.left) : Exit.succeed(verdict.right))
        }
      )
      return () => {
        withdrawRead()
        withdrawFiber()
      }
    }

    /** Every entitlement of the active plan with what is granted, used, remaining, pending and held; and the holds. */
    const list = Effect.fn("Entitlements.list")(function*(organizationId: string, customerId: string) {
        const now = yield* currentTime
        const customer: Customer = yield* customerOf(organizationId, { customerId })
        const { holds, simulated } = yield* stateOf(customer, [{}], "WALLET", now)
        const counted = countedHolds(simulated, holds)
        const heldOf = (meter: string, targetId: string | null) =>
          counted.filter((hold) => hold.meter === meter && hold.targetId === targetId)
            .reduce((total, hold) => BigDecimal.sum(total, hold.amount), ZERO)
        const purchase = simulated.state.purchase
        const wallet = {
          type: "WALLET" as const,
          id: null,
          name: "Wallet",
          agentKey: null,
          granted: null,
          used: null,
          remaining: simulated.committed.wallet,
          pending: simulated.pending.get("WALLET") ?? ZERO,
          held: heldOf("WALLET", null)
        }
        const activeHolds = yield* holdsOf(organizationId, customer.id, now)
        if (purchase === null) {
          return { customerId: customer.id, hasPlan: false, purchaseId: null, entitlements: [wallet], holds: activeHolds } satisfies CustomerEntitlements
        }
        const totals = yield* findAll(
          BalanceTotals,
          sql`SELECT component_id, granted, used, remaining FROM purchase_balances
              WHERE organization_id = ${organizationId} AND purchase_id = ${purchase.id}`
        )
        const totalOf = new Map(totals.map((row) => [row.componentId, row]))
        const components = purchase.snapshot.components
        const targets: Array<SnapshotComponent> = []
        for (const component of components) {
          if (component.type === "WALLET") continue
          if (!targets.some((t) => t.type === component.type && t.targetId === component.targetId)) targets.push(component)
        }
        const entitlements = targets.map((target) => {
          const own = components.filter((c) => c.type === target.type && c.targetId === target.targetId)
          const advance = own.find((c) => c.billingMode === "ADVANCE")
          const advanceRow = advance === undefined ? undefined : totalOf.get(advance.id)
          const used = own.reduce((total, c) => BigDecimal.sum(total, totalOf.get(c.id)?.used ?? ZERO), ZERO)
          const type = target.type === "PRICING_METRIC" ? "COMPOSITE" as const : target.type as "CREDIT" | "OUTCOME" | "UNIT"
          return {
            type,
            id: target.targetId,
            name: target.targetName,
            agentKey: target.agentKey,
            granted: advanceRow?.granted ?? ZERO,
            used,
            remaining: advanceRow?.remaining ?? ZERO,
            pending: simulated.pending.get(balanceKey(target.type, target.targetId)) ?? ZERO,
            held: heldOf(type, target.targetId)
          }
        })
        return {
          customerId: customer.id,
          hasPlan: true,
          purchaseId: purchase.id,
          entitlements: [...entitlements, wallet],
          holds: activeHolds
        } satisfies CustomerEntitlements
      })

    /** The customer's active holds (HELD, not expired), oldest first. */
    const holdsOf = (organizationId: string, customerId: string, now: Date) =>
      Effect.map(
        findAll(
          HoldRow,
          sql`SELECT id, customer_id, meter, target_id, amount, status, created_at, expires_at, ended_at, signal_id,
                     usage_log_id
              FROM reservations
              WHERE organization_id = ${organizationId} AND customer_id = ${customerId} AND status = 'HELD'
                AND expires_at > ${now}
              ORDER BY id`
        ),
        (rows) => rows.map((row) => holdOf(row, now))
      )

    /** The active holds of a customer (for `billing balance show`); unknown customer 404. */
    const activeHolds = Effect.fn("Entitlements.activeHolds")(function*(organizationId: string, customerId: string) {
        const now = yield* currentTime
        const customer = yield* customerOf(organizationId, { customerId })
        return yield* holdsOf(organizationId, customer.id, now)
      })

    const holdById = (organizationId: string, id: string) =>
      Effect.flatMap(
        findAll(
          HoldRow,
          sql`SELECT id, customer_id, meter, target_id, amount, status, created_at, expires_at, ended_at, signal_id,
                     usage_log_id
              FROM reservations WHERE organization_id = ${organizationId} AND id = ${id}`
        ),
        (rows) =>
          rows[0] === undefined
            ? Effect.fail(new ReservationNotFound({ message: `Reservation ${id} not found` }))
            : Effect.succeed(rows[0])
      )

    /**
     * `POST /reservations/{id}/release`: ends a HELD, unexpired hold now. A
     * hold that has ended already (settled, released, expired) is answered as
     * it is, `released: false`; nothing changes.
     */
    const release = Effect.fn("Entitlements.release")(function*(organizationId: string, id: string) {
        const now = yield* currentTime
        const released = yield* findAll(
          HoldRow,
          sql`UPDATE reservations SET status = 'RELEASED', ended_at = ${now}
              WHERE organization_id = ${organizationId} AND id = ${id} AND status = 'HELD' AND expires_at > ${now}
              RETURNING id, customer_id, meter, target_id, amount, status, created_at, expires_at, ended_at, signal_id,
                        usage_log_id`
        )
        if (released[0] !== undefined) return { released: true, reservation: holdOf(released[0], now) } satisfies ReleaseResult
        const row = yield* holdById(organizationId, id)
        return { released: false, reservation: holdOf(row, now) } satisfies ReleaseResult
      })

    /** One hold, as it stands now. */
    const hold = Effect.fn("Entitlements.hold")(function*(organizationId: string, id: string) {
        const now = yield* currentTime
        return holdOf(yield* holdById(organizationId, id), now)
      })

    return { check, checkNow, list, release, hold, activeHolds } as const
  })
}) {}
