/**
 * A request as the inbox's row: the one place a signal's columns are made,
 * whichever door it came in by (a queued route, a batch item, a completion,
 * or the worker completing a parked composite). Every row then goes in by one
 * statement (`insertSignals`, InboxInsert.ts).
 *
 * The rules a row obeys here, once: the customer is named by `customerId` or
 * `externalId` (`namedCustomer`: customerId wins, neither is a 400); no text
 * PostgreSQL cannot store (`unstorableText`: it would fail the statement the
 * row shares with others); a `timestamp` at most 5 minutes ahead of the clock
 * (`momentOf`, LateWindow.ts).
 */
import { Either } from "effect"
import { namedCustomer } from "../customers/Customer.ts"
import { type CustomerRefMissing, ValidationFailed } from "../errors.ts"
import { makeId } from "../ids.ts"
import { unstorableText } from "../schema.ts"
import type { Moment } from "./LateWindow.ts"
import { type SignalInput, type SignalRoute, tagOf } from "./Signal.ts"

/** A signal's moment: the rule is LateWindow.ts's. */
export { type Moment, momentAt, momentOf } from "./LateWindow.ts"

/** A signal in the inbox's columns, ready to be written. */
export interface InboxRow {
  readonly organizationId: string
  readonly id: string
  readonly messageId: string
  readonly route: SignalRoute
  readonly customerId: string | null
  readonly externalId: string | null
  readonly idempotencyKey: string | null
  readonly agentKey: string | null
  readonly runId: string | null
  readonly compositeRef: string | null
  readonly compositeValue: string | null
  readonly member: string | null
  /** The request as accepted (decoded and re-encoded), which the worker prices. */
  readonly body: unknown
  /** When the usage happened (the body's `timestamp`, ISO 8601); null: at intake. */
  readonly occurredAt?: string | null | undefined
  /** `occurredAt` is more than an hour before `intakeAt`: the backfill lane. */
  readonly late?: boolean | undefined
  /** The service's clock when the request came in: the late-usage window counts back from it. */
  readonly intakeAt?: string | undefined
  /** A completion's answer, which a repeat of its idempotency key gets back. */
  readonly response?: unknown
}

const unstorableWords = {
  NUL: "text must not contain NUL characters",
  LONE_SURROGATE: "text must not contain unpaired UTF-16 surrogates"
} as const

/** Why a signal's body is refused before anything is written. */
export type InvalidBody = ValidationFailed | CustomerRefMissing

/** The row of a request whose `body` is what the inbox keeps, at `moment`; or why it is refused before any write. */
export const inboxRowOf = (
  organizationId: string,
  route: SignalRoute,
  input: SignalInput,
  body: unknown,
  moment: Moment,
  made: { readonly id?: string; readonly response?: unknown } = {}
): Either.Either<InboxRow, InvalidBody> => {
  const named = namedCustomer(input)
  if (Either.isLeft(named)) return Either.left(named.left)
  const unstorable = unstorableText(body)
  if (unstorable !== undefined) {
    return Either.left(new ValidationFailed({
      message: `Invalid request: ${unstorableWords[unstorable.reason]}`,
      errors: [{ field: unstorable.path.length === 0 ? null : unstorable.path.join("."), message: unstorableWords[unstorable.reason] }]
    }))
  }
  const tag = input.composite ? tagOf(input.composite) : undefined
  return Either.right({
    organizationId,
    id: made.id ?? makeId("sig"),
    messageId: makeId("msg"),
    route,
    customerId: named.right._tag === "ById" ? named.right.customerId : null,
    externalId: named.right._tag === "ByExternalId" ? named.right.externalId : null,
    idempotencyKey: input.idempotencyKey ?? null,
    agentKey: input.agentKey ?? null,
    runId: input.runId ?? null,
    compositeRef: tag?.refId ?? null,
    compositeValue: tag?.value ?? null,
    member: input.member ?? null,
    body,
    occurredAt: moment.occurredAt,
    late: moment.late,
    intakeAt: moment.intakeAt,
    response: made.response
  })
}
