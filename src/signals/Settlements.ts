/**
 * Settling spend holds (issue 26): a priced signal that names a hold of its
 * customer (`reservationId`) ends it as SETTLED in the batch's transaction,
 * with the signal and its usage-log row, so the hold stops counting exactly
 * when the real charge is committed. The hold's amount plays no part in the
 * charge: the signal is priced as any other (an overrun beyond the hold
 * follows the usual rules). Only a HELD, unexpired hold of the same
 * organisation and customer settles, once: a second signal naming it, or one
 * naming an unknown, foreign, released or expired hold, is priced as usual
 * and settles nothing. The ledger writes the settlements with the batch's
 * usage rows (src/ledger/UsageRows.ts `settleHoldsStatement`).
 */
import type { HoldSettlement } from "../ledger/UsageRows.ts"
import type { DecodedSignal } from "./ClaimedSignal.ts"

/** The hold a priced signal settles with its usage row `usageLogId`; undefined when it names none. */
export const settlementOf = (signal: DecodedSignal, customerId: string, usageLogId: string): HoldSettlement | undefined =>
  signal.body.reservationId === undefined ? undefined : {
    organizationId: signal.record.organizationId,
    reservationId: signal.body.reservationId,
    customerId,
    signalId: signal.record.id,
    usageLogId
  }
