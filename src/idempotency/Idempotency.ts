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
 * unique index decides races; this module holds the rules they share, and
 * `claimKey`, the first step of every keyed write.
 */
import { Effect, Either, Option } from "effect"
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

/**
 * The first step of a keyed write, inside the caller's transaction. `record` inserts the key's record
 * (`INSERT ... ON CONFLICT DO NOTHING RETURNING`): a row back means the key is new, and the answer is
 * `None`: the caller goes on with the write and completes the record. No row means the key was taken
 * (a concurrent first request is waited for by the unique index): `stored` reads the first request's
 * record, and the answer is that record when the fingerprints match, `IdempotencyKeyReused` when not.
 */
export const claimKey = <A extends { readonly fingerprint: string }, E1, R1, E2, R2>(
  key: string,
  fingerprint: string,
  record: Effect.Effect<ReadonlyArray<unknown>, E1, R1>,
  stored: Effect.Effect<A, E2, R2>
): Effect.Effect<Option.Option<A>, E1 | E2 | IdempotencyKeyReused, R1 | R2> =>
  Effect.flatMap(record, (inserted) =>
    inserted.length > 0
      ? Effect.succeedNone
      : Effect.flatMap(stored, (first) =>
        Either.match(replay(key, { fingerprint: first.fingerprint, answer: first }, fingerprint), {
          onLeft: Effect.fail,
          onRight: Effect.succeedSome
        })))

/**
 * A write that may carry a key: `claimKey` when it does; without one, the record is inserted and
 * there is nothing to replay (`None`).
 */
export const claimKeyIfAny = <A extends { readonly fingerprint: string }, E1, R1, E2, R2>(
  key: string | undefined,
  fingerprint: string,
  record: Effect.Effect<ReadonlyArray<unknown>, E1, R1>,
  stored: Effect.Effect<A, E2, R2>
): Effect.Effect<Option.Option<A>, E1 | E2 | IdempotencyKeyReused, R1 | R2> =>
  key === undefined ? Effect.as(record, Option.none<A>()) : claimKey(key, fingerprint, record, stored)
