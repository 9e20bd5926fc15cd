/**
 * The operator's view of the signal inbox: list and read signals, and queue a
 * PENDING or FAILED one again (`billing signal list|get|replay`).
 *
 * Signals that ended longer ago than the retention window live in the archive
 * (SignalArchive.ts): a rawId is still read from there, and a FAILED one
 * replayed goes back to the inbox; lists show the inbox only (docs/signals.md,
 * "Retention").
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { Customers } from "../customers/Customers.ts"
import { dieOnSqlError, findAll, findByIdOr, knownCursor, orDie, pageClause } from "../db/Sql.ts"
import { SignalAlreadyProcessed, SignalNotFound } from "../errors.ts"
import { CustomerId, type OrganizationId } from "../ids.ts"
import type { Page } from "../Page.ts"
import { SignalRecord, type SignalStatus } from "./Signal.ts"
import { currentTime } from "../time.ts"
import { archivedSignal, forgetArchived, restoreFailed } from "./SignalArchive.ts"

export interface SignalListQuery {
  readonly page: Page
  readonly customerId?: string | undefined
  readonly status?: SignalStatus | undefined
  /** A `customerId` the workspace does not have is CustomerNotFound (the API's rule), not an empty list (the CLI's). */
  readonly customerMustExist?: boolean | undefined
}

export class InboxView extends Effect.Service<InboxView>()("InboxView", {
  dependencies: [Customers.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const customers = yield* Customers

    const list = Effect.fn("InboxView.list")(function*(organizationId: OrganizationId, query: SignalListQuery) {
      if (query.customerMustExist && query.customerId !== undefined) {
        yield* customers.get(organizationId, CustomerId.make(query.customerId))
      }
      yield* knownCursor(sql, "signals", organizationId, query.page)
      return yield* findAll(
        SignalRecord,
        sql`SELECT * FROM signals
            WHERE organization_id = ${organizationId}
              AND (${query.customerId ?? null}::text IS NULL OR customer_id = ${query.customerId ?? null})
              AND (${query.status ?? null}::text IS NULL OR status = ${query.status ?? null})
              ${pageClause(sql, query.page)}`
      )
    })

    const notFound = (id: string) => new SignalNotFound({ message: `Signal ${id} not found` })
    const findRow = findByIdOr(sql, SignalRecord, "signals", notFound)
    /** The inbox's row, else the archive's: a rawId stays answerable once its signal has moved. */
    const get = Effect.fn("InboxView.get")((organizationId: OrganizationId, id: string) =>
      Effect.catchTag(findRow(organizationId, id), "SignalNotFound", (missing) =>
        Effect.flatMap(archivedSignal(sql, organizationId, id), Option.match({
          onNone: () => Effect.fail(missing),
          onSome: Effect.succeed
        }))))

    /**
     * Queues a PENDING or FAILED signal again. A PROCESSED one is refused: it
     * was billed, and replaying it would bill it twice. The replay's moment is
     * kept (`requeued_at`): a signal without a timestamp of its own is billed
     * at it, as if sent now; one still QUEUED keeps the moment it has. A
     * FAILED signal of the archive comes back to the inbox first; a copy the
     * history job made of one still in the inbox is dropped (it ended again
     * later, and is copied again then).
     */
    const replay = Effect.fn("InboxView.replay")(function*(organizationId: OrganizationId, id: string) {
        const signal = yield* get(organizationId, id)
        if (signal.status === "PROCESSED") {
          return yield* new SignalAlreadyProcessed({ message: `Signal ${id} was processed already; replaying it would bill it twice` })
        }
        yield* restoreFailed(sql, organizationId, id)
        const at = yield* currentTime
        const rows = yield* findAll(
          SignalRecord,
          sql`UPDATE signals SET status = 'QUEUED', error_status = NULL, error_code = NULL, error_message = NULL,
                requeued_at = CASE WHEN status = 'QUEUED' THEN requeued_at ELSE ${at}::timestamptz END
              WHERE organization_id = ${organizationId} AND id = ${id} AND status IN ('PENDING', 'FAILED', 'QUEUED')
              RETURNING *`
        )
        yield* forgetArchived(sql, organizationId, id)
        return rows[0] ?? (yield* get(organizationId, id))
      }, sql.withTransaction, dieOnSqlError)

    /** The PENDING and FAILED signals of a customer (its own, and those waiting for its externalId). */
    const replayable = Effect.fn("InboxView.replayable")(function*(organizationId: OrganizationId, customerId: CustomerId) {
        const customer = yield* customers.get(organizationId, customerId)
        return yield* orDie(
          sql<{ id: string }>`SELECT id FROM signals
            WHERE organization_id = ${organizationId} AND status IN ('PENDING', 'FAILED')
              AND (customer_id = ${customer.id} OR (customer_id IS NULL AND external_id = ${customer.externalId}))
            ORDER BY id`
        ).pipe(Effect.map((rows) => rows.map((row) => row.id)))
      })

    return { list, get, replay, replayable } as const
  })
}) {}
