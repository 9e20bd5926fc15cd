/**
 * A priced signal tagged `{refId: value}` joins its composite occurrence, in
 * its batch's transaction, after the batch's writes: when that occurrence was
 * parked and this was its last missing signal, the occurrence completes and
 * its billing is queued as a signal like any completion (Occurrences.ts).
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { makeId } from "../ids.ts"
import { currentTimeMillis } from "../time.ts"
import type { BatchContext, SignalRecord } from "./BatchContext.ts"
import { inboxRowOf, momentAt } from "./InboxRow.ts"
import { insertSignals } from "./InboxInsert.ts"
import { tagOf } from "./MeterSignal.ts"
import { lockOccurrence, missingSignals } from "./Occurrences.ts"
import type { SignalInput } from "./Signal.ts"

/**
 * One occurrence at a time: tags are rare, and the occurrence row lock is
 * what keeps completion exact.
 */
export const joinOccurrence = (sql: SqlClient.SqlClient, signal: SignalRecord, customerId: string, context: BatchContext) =>
  Effect.gen(function*() {
    const org = signal.organizationId
    const tag = tagOf(signal, context)
    if (tag === undefined) return
    const value = tag.value
    const occurrence = yield* lockOccurrence(sql, org, tag.composite.id, value)
    if (occurrence.status !== "PARKED" || occurrence.customerId !== customerId) return
    const customer = context.customerById(org, customerId)
    const missing = yield* missingSignals(sql, org, tag.composite, value, {
      id: customerId,
      externalId: customer?.externalId ?? null
    })
    if (missing.length > 0) return
    const rawId = makeId("sig")
    const body = {
      customerId,
      composite: { [tag.composite.refId]: value },
      ...(occurrence.member === null ? {} : { member: occurrence.member }),
      ...(occurrence.custom === null ? {} : { custom: occurrence.custom as SignalInput["custom"] })
    }
    // The occurrence completes when its last missing signal happened: billed in that cycle.
    const row = yield* inboxRowOf(org, "COMPOSITE_COMPLETE", body, body, momentAt(signal.moment, yield* currentTimeMillis), { id: rawId })
    const [written] = yield* insertSignals(sql, [row])
    yield* written!
    yield* sql`UPDATE composite_occurrences SET status = 'COMPLETED', signal_id = ${rawId},
                     completed_at = now(), updated_at = now()
                   WHERE organization_id = ${org} AND composite_id = ${tag.composite.id} AND value = ${value}`
  }).pipe(Effect.orDie)
