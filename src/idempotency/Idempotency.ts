/**
 * Idempotency keys, one rule for every keyed route: a key is unique per
 * workspace and per scope (the adjustment endpoint, the signal route); the
 * first request under a key is recorded with its fingerprint and answer, in
 * the same transaction as what it did; a repeat with the same fingerprint gets
 * the stored answer back and changes nothing; a repeat with another
 * fingerprint is `IdempotencyKeyReused` (422), unless the route's policy (the
 * spec's, for signals) is to answer every repeat with the first answer.
 *
 * The record itself lives beside what it guards (the inbox row of a signal,
 * the adjustment row), so the guarded write and the key commit together and a
 * unique index decides races; this module holds the rules both share.
 */
import { Either } from "effect"
import { IdempotencyKeyReused } from "../errors.ts"

/** A request's fingerprint: the canonical JSON of the parts that make two requests the same. */
export const fingerprintOf = (parts: ReadonlyArray<unknown>): string => JSON.stringify(parts)

export interface StoredRequest<A> {
  readonly fingerprint: string
  readonly answer: A
}

/** What a repeated key answers: the stored answer, or the refusal of a key reused for another request. */
export const replay = <A>(
  key: string,
  stored: StoredRequest<A>,
  fingerprint: string,
  policy: "same-request-only" | "first-answer" = "same-request-only"
): Either.Either<A, IdempotencyKeyReused> =>
  policy === "first-answer" || stored.fingerprint === fingerprint
    ? Either.right(stored.answer)
    : Either.left(new IdempotencyKeyReused({ message: `idempotencyKey ${key} was already used with a different request` }))
