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
  /** Days after an invoice becomes final that it is due, for customers without terms of their own (0 to 365). */
  paymentTermsDays: Schema.Int,
  /** The billing contact's e-mail address, shown to customers (hosted page, PDF); null when not set. */
  billingEmail: Schema.NullOr(Schema.String),
  /** The billing contact's postal address, as free text lines; null when not set. */
  billingAddressLines: Schema.NullOr(Schema.Array(Schema.String)),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
}) {}

/**
 * The organisation's billing contact as customers are shown it (the hosted
 * invoice page, the PDF) and the settings answer it: `addressLines` empty when
 * no address is set.
 */
export const billingContactOf = (organization: Pick<Organization, "billingEmail" | "billingAddressLines">) => ({
  email: organization.billingEmail,
  addressLines: organization.billingAddressLines ?? []
})

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
  paymentTermsDays: organization.paymentTermsDays,
  billingContact: billingContactOf(organization),
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
  /** Days after an invoice becomes final that it is due: `PAYMENT_TERMS_DAYS`. */
  readonly paymentTermsDays?: number | undefined
  /** The billing contact: a part sent changes (null or empty clears it), a part left out stays. */
  readonly billingContact?: BillingContactChange | undefined
}

/** A change of the billing contact: `email` null or "" clears it, `addressLines` null or [] clears the address. */
export interface BillingContactChange {
  readonly email?: string | null | undefined
  readonly addressLines?: ReadonlyArray<string> | null | undefined
}

/** The late-usage window's bounds (days) and its default. */
export const LATE_USAGE_DAYS = { min: 0, max: 365, default: 35 } as const
/** The grace period's bounds (hours) and its default. */
export const INVOICE_GRACE_HOURS = { min: 0, max: 720, default: 0 } as const

/**
 * Payment terms, in whole days (Stripe's `days_until_due`, Lago's
 * `net_payment_term`, Orb's `net_terms`): 0 (due when final) to a year;
 * anything longer is a typing mistake rather than terms.
 */
export const PAYMENT_TERMS_DAYS = { min: 0, max: 365, default: 0 } as const

/** The billing contact's bounds: an e-mail address as customers' are, a postal address of a few short lines. */
export const BILLING_CONTACT = { emailMax: 254, lines: 8, lineMax: 120 } as const

const emailPattern = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

/** What is wrong with a billing contact change, in words; undefined when nothing. */
export const billingContactProblem = (change: BillingContactChange) => {
  const email = change.email?.trim()
  if (email !== undefined && email !== "" && (email.length > BILLING_CONTACT.emailMax || !emailPattern.test(email))) {
    return `billing contact email must be an e-mail address of at most ${BILLING_CONTACT.emailMax} characters (got ${JSON.stringify(change.email)})`
  }
  const lines = change.addressLines
  if (lines != null) {
    if (lines.length > BILLING_CONTACT.lines) return `billing contact address must be at most ${BILLING_CONTACT.lines} lines`
    for (const line of lines) {
      if (line.trim().length === 0 || line.length > BILLING_CONTACT.lineMax || /[\r\n]/.test(line)) {
        return `each billing contact address line must be 1 to ${BILLING_CONTACT.lineMax} characters on one line, not blank`
      }
    }
  }
  return undefined
}

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
        const badTerms = settings.paymentTermsDays === undefined
          ? undefined
          : wholeNumberIn("payment terms days", settings.paymentTermsDays, PAYMENT_TERMS_DAYS)
        if (badTerms !== undefined) return yield* new InvalidOrganizationSettings({ message: badTerms })
        const contact = settings.billingContact
        const badContact = contact === undefined ? undefined : billingContactProblem(contact)
        if (badContact !== undefined) return yield* new InvalidOrganizationSettings({ message: badContact })
        const email = contact?.email === undefined ? undefined : (contact.email ?? "").trim()
        const lines = contact?.addressLines === undefined ? undefined : (contact.addressLines ?? []).map((line) => line.trim())
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
                payment_terms_days = coalesce(${settings.paymentTermsDays ?? null}::integer, payment_terms_days),
                billing_email = CASE WHEN ${email === undefined}::boolean THEN billing_email
                  ELSE nullif(${email ?? ""}, '') END,
                billing_address_lines = CASE WHEN ${lines === undefined}::boolean THEN billing_address_lines
                  WHEN ${lines === undefined || lines.length === 0}::boolean THEN NULL
                  ELSE ${lines ?? []}::text[] END,
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
