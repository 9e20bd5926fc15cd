/**
 * Organisations (workspaces). Created by operators from the CLI, which stands
 * in for the spec's dashboard; a new organisation gets the built-in models and
 * its first API key in the same transaction.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Either, Option, ParseResult, Schema } from "effect"
import { dieOnSqlError, findAll, findOne, foundOr, orDie } from "../db/Sql.ts"
import { InvalidOrganizationSettings, OrganizationNotFound } from "../errors.ts"
import { makeId, OrganizationId } from "../ids.ts"
import { builtinModels } from "../models/BuiltinModels.ts"
import { ApiKeys } from "./ApiKeys.ts"
import { changedRateLimits, RateLimitsChange, rateLimitsInForce, StoredRateLimits } from "./RateLimits.ts"

export class Organization extends Schema.Class<Organization>("Organization")({
  id: OrganizationId,
  name: Schema.String,
  currencyCode: Schema.String,
  reservedWalletEnabled: Schema.Boolean,
  paymentInstructions: Schema.NullOr(Schema.String),
  /** How old a signal's `timestamp` may be, in days (0 to 365). */
  lateUsageDays: Schema.Int,
  /** How long a cycle-end usage invoice stays DRAFT for late usage, in hours (0 to 720; 0: final at once). */
  invoiceGraceHours: Schema.Int,
  /** What every invoice number of the organisation starts with (`INV-` in `INV-000042`), fixed on an invoice when it is finalised. */
  invoiceNumberPrefix: Schema.String,
  /** The API rate limits it set (src/organizations/RateLimits.ts); null: the defaults for every family. */
  rateLimits: Schema.NullOr(StoredRateLimits),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
}) {}

/** An organisation's settings as the API and the CLI show them: the rate limits in force, and where each comes from. */
export const settingsOf = (organization: Organization) => ({
  id: organization.id,
  name: organization.name,
  currencyCode: organization.currencyCode,
  reservedWalletEnabled: organization.reservedWalletEnabled,
  paymentInstructions: organization.paymentInstructions,
  lateUsageDays: organization.lateUsageDays,
  invoiceGraceHours: organization.invoiceGraceHours,
  invoiceNumberPrefix: organization.invoiceNumberPrefix,
  rateLimits: rateLimitsInForce(organization.rateLimits),
  createdAt: organization.createdAt,
  updatedAt: organization.updatedAt
})

export interface OrganizationSettings {
  readonly reservedWalletEnabled?: boolean | undefined
  readonly name?: string | undefined
  /** Shown on the hosted page of an OPEN invoice; "" clears it. */
  readonly paymentInstructions?: string | undefined
  /** How old a signal's `timestamp` may be, in whole days: 0 to 365. */
  readonly lateUsageDays?: number | undefined
  /** How long a cycle-end usage invoice stays DRAFT, in whole hours: 0 to 720. */
  readonly invoiceGraceHours?: number | undefined
  /** The prefix of invoice numbers finalised from now on: `INVOICE_NUMBER_PREFIX`. */
  readonly invoiceNumberPrefix?: string | undefined
  /** API rate limits by route family: a family sent changes, null puts it back to the default. */
  readonly rateLimits?: RateLimitsChange | undefined
}

/** The late-usage window's bounds (days) and its default. */
export const LATE_USAGE_DAYS = { min: 0, max: 365, default: 35 } as const
/** The grace period's bounds (hours) and its default. */
export const INVOICE_GRACE_HOURS = { min: 0, max: 720, default: 0 } as const

/** A whole number within `range`, or why not, in words naming `name`. */
export const wholeNumberIn = (name: string, value: number, range: { readonly min: number; readonly max: number }) =>
  Number.isSafeInteger(value) && value >= range.min && value <= range.max
    ? undefined
    : `${name} must be a whole number from ${range.min} to ${range.max}`

/**
 * An invoice number's prefix: 0 to 20 characters from letters, digits and
 * `. _ / -` (what a bank transfer's reference field takes); `INV-` by default.
 */
export const INVOICE_NUMBER_PREFIX = { pattern: /^[A-Za-z0-9._/-]{0,20}$/, default: "INV-" } as const

export const invoicePrefixProblem = (prefix: string) =>
  INVOICE_NUMBER_PREFIX.pattern.test(prefix)
    ? undefined
    : `invoice number prefix must be 0 to 20 characters from letters, digits and . _ / - (got ${JSON.stringify(prefix)})`

/** Enough for bank details and a note; the page shows it as plain text. */
export const MAX_PAYMENT_INSTRUCTIONS = 2000

export class Organizations extends Effect.Service<Organizations>()("Organizations", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keys = yield* ApiKeys

    const create = Effect.fn("Organizations.create")(function*(input: { readonly name: string; readonly currencyCode?: string | undefined }) {
        const name = input.name.trim()
        if (name.length === 0 || name.length > 120) {
          return yield* new InvalidOrganizationSettings({ message: "name must be 1 to 120 characters" })
        }
        const currencyCode = (input.currencyCode ?? "USD").toUpperCase()
        if (!/^[A-Z]{3}$/.test(currencyCode)) {
          return yield* new InvalidOrganizationSettings({ message: "currencyCode must be a 3-letter ISO 4217 code" })
        }
        const id = OrganizationId.make(makeId("org"))
        const organization = (yield* findAll(
          Organization,
          sql`INSERT INTO organizations (id, name, currency_code) VALUES (${id}, ${name}, ${currencyCode}) RETURNING *`
        ))[0]!
        yield* orDie(sql`INSERT INTO models ${
          sql.insert(builtinModels.map((model) => ({
            organizationId: id,
            id: model.id,
            name: model.name,
            inputRate: model.input,
            outputRate: model.output,
            cacheReadRate: model.cacheRead,
            cacheWriteRate: model.cacheWrite,
            builtIn: true
          })))
        }`)
        const { secret } = yield* keys.create(id, { name: "default" })
        return { organization, apiKey: secret }
      }, sql.withTransaction, dieOnSqlError)

    const list = findAll(Organization, sql`SELECT * FROM organizations ORDER BY id`).pipe(Effect.withSpan("Organizations.list"))

    const get = Effect.fn("Organizations.get")((id: string) =>
      foundOr(() => new OrganizationNotFound({ message: `Organization ${id} not found` }))(
        findOne(Organization, sql`SELECT * FROM organizations WHERE id = ${id}`)
      ))

    const updateSettings = Effect.fn("Organizations.updateSettings")(function*(id: string, settings: OrganizationSettings) {
        const current = yield* get(id)
        const name = settings.name?.trim()
        if (name !== undefined && (name.length === 0 || name.length > 120)) {
          return yield* new InvalidOrganizationSettings({ message: "name must be 1 to 120 characters" })
        }
        const instructions = settings.paymentInstructions?.trim()
        if (instructions !== undefined && instructions.length > MAX_PAYMENT_INSTRUCTIONS) {
          return yield* new InvalidOrganizationSettings({ message: `payment instructions must be at most ${MAX_PAYMENT_INSTRUCTIONS} characters` })
        }
        const outOfRange = (settings.lateUsageDays === undefined
          ? undefined
          : wholeNumberIn("late-usage days", settings.lateUsageDays, LATE_USAGE_DAYS)) ??
          (settings.invoiceGraceHours === undefined
            ? undefined
            : wholeNumberIn("invoice grace hours", settings.invoiceGraceHours, INVOICE_GRACE_HOURS))
        if (outOfRange !== undefined) return yield* new InvalidOrganizationSettings({ message: outOfRange })
        const badPrefix = settings.invoiceNumberPrefix === undefined ? undefined : invoicePrefixProblem(settings.invoiceNumberPrefix)
        if (badPrefix !== undefined) return yield* new InvalidOrganizationSettings({ message: badPrefix })
        let rateLimits: StoredRateLimits | null | undefined
        if (settings.rateLimits !== undefined) {
          const change = Schema.decodeUnknownEither(RateLimitsChange)(settings.rateLimits)
          if (Either.isLeft(change)) {
            return yield* new InvalidOrganizationSettings({
              message: `rate limits: ${ParseResult.ArrayFormatter.formatErrorSync(change.left).map((issue) => issue.message).join("; ")}`
            })
          }
          rateLimits = changedRateLimits(current.rateLimits, change.right)
        }
        const updated = yield* findOne(
          Organization,
          sql`UPDATE organizations SET
                reserved_wallet_enabled = coalesce(${settings.reservedWalletEnabled ?? null}, reserved_wallet_enabled),
                name = coalesce(${name ?? null}, name),
                payment_instructions = CASE WHEN ${instructions === undefined}::boolean THEN payment_instructions
                  ELSE nullif(${instructions ?? ""}, '') END,
                late_usage_days = coalesce(${settings.lateUsageDays ?? null}::integer, late_usage_days),
                invoice_grace_hours = coalesce(${settings.invoiceGraceHours ?? null}::integer, invoice_grace_hours),
                invoice_number_prefix = coalesce(${settings.invoiceNumberPrefix ?? null}::text, invoice_number_prefix),
                rate_limits = CASE WHEN ${rateLimits === undefined}::boolean THEN rate_limits
                  ELSE ${rateLimits == null ? null : JSON.stringify(rateLimits)}::jsonb END,
                updated_at = now()
              WHERE id = ${id} RETURNING *`
        )
        if (rateLimits !== undefined) yield* keys.organizationChanged(current.id)
        return Option.getOrThrow(updated)
      }, sql.withTransaction, dieOnSqlError)

    return { create, list, get, updateSettings } as const
  }),
  dependencies: [ApiKeys.Default]
}) {}
