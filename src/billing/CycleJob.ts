/**
 * The worker job that activates scheduled purchases and renews ended cycles,
 * a batch of purchases per transaction (Purchases.renewBatch), then finalises
 * the DRAFT usage invoices whose grace period ended (DraftInvoices.finalizeDue),
 * then marks the OPEN invoices past their due date overdue (DueDates.markAllOverdue).
 */
import { Effect } from "effect"
import { waitForHeldWork } from "../worker/HeldWork.ts"
import { jobOf } from "../worker/Worker.ts"
import { finalizeDue } from "./DraftInvoices.ts"
import { markAllOverdue } from "./DueDates.ts"
import { Purchases } from "./Purchases.ts"

/**
 * Purchases renewed per transaction. A batch costs about 15 statements
 * whatever its size, so at 500 the fixed cost is ~0.03 statements a renewal
 * and the batch's own work (decoding snapshots, building invoices, the
 * multi-row INSERTs: a few thousand rows of a few hundred bytes) dominates.
 * Larger batches gain little more and would hold their locks longer: the
 * batch's purchases, balance rows and wallets stay locked until it commits
 * (a few hundred milliseconds at this size), during which signals, adjustments
 * and cancellations of those customers wait; and a worker that joins late gets
 * a smaller share of the day. `BILLING_CYCLE_BATCH` overrides it.
 */
export const CYCLE_BATCH_SIZE = Math.max(1, Number(process.env.BILLING_CYCLE_BATCH ?? 500))

/** How long one call waits, at most, for due purchases that other workers hold. */
const WAIT_FOR_OTHERS_MS = 60_000
const WAIT_STEP_MS = 20

/**
 * One batch of at most `batchSize` purchases. When nothing could be claimed
 * but something is still due, the due purchases are held by another worker's
 * batch (or a signal batch): it waits for them rather than reporting idle, so
 * that `billing cycle run` does not stop while a purchase several cycles
 * behind still has cycles to catch up. The number renewed; 0 when idle.
 */
export const renewDue = (now: Date, batchSize: number = CYCLE_BATCH_SIZE): Effect.Effect<number, never, Purchases> =>
  Effect.flatMap(Purchases, (purchases) =>
    waitForHeldWork(purchases.renewBatch(now, batchSize), purchases.anyDue(now), {
      stepMs: WAIT_STEP_MS,
      maxWaitMs: WAIT_FOR_OTHERS_MS
    }))

/** The cycle job, by name (the worker's view lists it before the services are built). */
export const billingCycleJobName = "billing-cycles"

/**
 * One batch of the cycle job: renewals first (a cycle that ends now may be
 * finalised in the same run when its grace period is already over), then,
 * when nothing is left to renew, a batch of DRAFT usage invoices whose grace
 * period ended (DraftInvoices.finalizeDue), then, when none is left either,
 * the OPEN invoices whose due date passed are marked overdue, a batch a
 * transaction until none is left (DueDates.markAllOverdue: after the
 * finalisations, so an invoice finalised in this run is judged by the due
 * date it was just given). The number of purchase cycles renewed or
 * finalised, what `billing cycle run` reports; overdue marks are not counted,
 * so a run whose only work was marking reports 0, and a worker looping on the
 * job reads the due invoices once an idle poll (one indexed statement).
 */
export const billingCycleJob = jobOf(
  billingCycleJobName,
  (now) =>
    Effect.flatMap(renewDue(now), (renewed) =>
      renewed > 0
        ? Effect.succeed(renewed)
        : Effect.flatMap(finalizeDue(now), (finalised) =>
          finalised > 0 ? Effect.succeed(finalised) : Effect.as(markAllOverdue(now), 0)))
)

/**
 * How many batches `billing cycle run` keeps in flight: while one batch waits
 * for PostgreSQL the other computes its renewals, so the process and the
 * database work side by side (a lone batch left each idle half the time). The
 * batches claim disjoint purchases (`SKIP LOCKED`) and so disjoint customers,
 * wallets and owed rows: two lanes are two workers. `BILLING_CYCLE_LANES`
 * overrides it.
 */
export const CYCLE_LANES = Math.max(1, Number(process.env.BILLING_CYCLE_LANES ?? 2))

/** The cycle job once per lane, for a run that drains the day's renewals (`runWorker` runs each in its own loop). */
export const billingCycleLanes = Effect.map(billingCycleJob, (job) => Array.from({ length: CYCLE_LANES }, () => job))
