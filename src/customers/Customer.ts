/** The customer: the billing identity of the organisation's own customer. */
import { Either, Schema } from "effect"
import { CustomerArchived, CustomerRefMissing } from "../errors.ts"
import { CustomerId } from "../ids.ts"
import { PAYMENT_TERMS_DAYS } from "../organizations/Organizations.ts"
import { CurrencyCode, ExternalId, strict, Timestamp } from "../schema.ts"

/**
 * The one rule every write path shares: an archived customer is read-only
 * (409), its profile, members, purchases, wallet settings and signals alike.
 * `refused` finishes the message ("cannot be changed", "cannot receive signals").
 * Exceptions, deliberate: balance adjustments (the spec answers them with
 * `customerArchived: true`) and cancelling a purchase (docs/api.md).
 */
export const ensureActive = <C extends { readonly id: string; readonly archivedAt: Date | null }>(
  customer: C,
  refused = "cannot be changed"
): Either.Either<C, CustomerArchived> =>
  customer.archivedAt === null ? Either.right(customer) : Either.left(archivedRefusal(customer.id, refused))

export const archivedRefusal = (customerId: string, refused = "cannot be changed") =>
  new CustomerArchived({ message: `Customer ${customerId} is archived and ${refused}` })

const text = (max: number, what: string) =>
  Schema.String.pipe(Schema.maxLength(max, { message: () => `must be at most ${max} characters` })).annotations({
    description: `${what}, at most ${max} characters; null clears it.`
  })

export const CustomerName = Schema.String.pipe(
  Schema.filter((s) => s.trim().length > 0 || "must not be empty"),
  Schema.maxLength(200, { message: () => "must be at most 200 characters" })
).annotations({ description: "The customer's name, 1 to 200 characters, not blank." })

export const Email = Schema.String.pipe(
  Schema.maxLength(254, { message: () => "must be at most 254 characters" }),
  Schema.pattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/, { message: () => "must be a valid e-mail address" })
).annotations({ description: "An e-mail address, at most 254 characters." })

/** Optional profile fields and their length limits (the spec leaves these open; see docs/api.md). */
export const profileFields = {
  description: text(400, "Free text about the customer"),
  website: text(255, "Website address"),
  phone: text(40, "Phone number"),
  legalName: text(200, "Registered legal name"),
  addressLine1: text(255, "First line of the postal address"),
  city: text(120, "City"),
  state: text(120, "State or region"),
  country: text(120, "Country"),
  pincode: text(20, "Postal code"),
  taxId: text(64, "Tax registration number")
} as const

export type ProfileField = keyof typeof profileFields

/**
 * The customer's own payment terms (docs/billing.md "Due dates and overdue"):
 * whole days after an invoice becomes final that it is due; a value outside
 * them is a 400 `validation_failed`.
 */
export const CustomerPaymentTerms = Schema.Number.pipe(
  Schema.int({ message: () => "payment terms must be a whole number of days" }),
  Schema.between(PAYMENT_TERMS_DAYS.min, PAYMENT_TERMS_DAYS.max, {
    message: () => `payment terms must be from ${PAYMENT_TERMS_DAYS.min} to ${PAYMENT_TERMS_DAYS.max} days`
  })
).annotations({
  description: `Days after one of the customer's invoices becomes final that it is due (${PAYMENT_TERMS_DAYS.min} to ` +
    `${PAYMENT_TERMS_DAYS.max}), instead of the workspace's \`paymentTermsDays\`; null (the default) takes the ` +
    "workspace's. Applies to invoices finalised from then on."
})

const nullableProfile = {
  description: Schema.NullOr(Schema.String),
  website: Schema.NullOr(Schema.String),
  phone: Schema.NullOr(Schema.String),
  legalName: Schema.NullOr(Schema.String),
  addressLine1: Schema.NullOr(Schema.String),
  city: Schema.NullOr(Schema.String),
  state: Schema.NullOr(Schema.String),
  country: Schema.NullOr(Schema.String),
  pincode: Schema.NullOr(Schema.String),
  taxId: Schema.NullOr(Schema.String)
}

export class Customer extends Schema.Class<Customer>("Customer")({
  id: CustomerId,
  externalId: Schema.NullOr(Schema.String),
  slug: Schema.String,
  name: Schema.String,
  email: Schema.String,
  ...nullableProfile,
  currencyCode: Schema.String,
  paymentTermsDays: Schema.NullOr(Schema.Number).annotations({
    description: "The customer's own payment terms in days; null when the workspace's `paymentTermsDays` apply."
  }),
  archivedAt: Schema.NullOr(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp
}) {}

const optionalNullable = <S extends Schema.Schema.Any>(schema: S) => Schema.optional(Schema.NullOr(schema))

export const CustomerCreate = Schema.Struct({
  name: CustomerName,
  email: Email,
  externalId: optionalNullable(ExternalId),
  description: optionalNullable(profileFields.description),
  website: optionalNullable(profileFields.website),
  phone: optionalNullable(profileFields.phone),
  legalName: optionalNullable(profileFields.legalName),
  addressLine1: optionalNullable(profileFields.addressLine1),
  city: optionalNullable(profileFields.city),
  state: optionalNullable(profileFields.state),
  country: optionalNullable(profileFields.country),
  pincode: optionalNullable(profileFields.pincode),
  taxId: optionalNullable(profileFields.taxId),
  currencyCode: Schema.optional(CurrencyCode).annotations({
    description: "The customer's currency, a 3-letter ISO 4217 code; the workspace's primary currency by default."
  }),
  paymentTermsDays: optionalNullable(CustomerPaymentTerms)
}).annotations(strict)
export type CustomerCreate = typeof CustomerCreate.Type

/** A PATCH: omitted fields are untouched; null clears an optional field (or the externalId). */
export const CustomerUpdate = Schema.Struct({
  ...CustomerCreate.fields,
  name: Schema.optional(CustomerName),
  email: Schema.optional(Email)
}).annotations(strict)
export type CustomerUpdate = typeof CustomerUpdate.Type

/** How a request names its customer: `customerId` wins; otherwise `externalId`. */
export interface CustomerRef {
  readonly customerId?: string | undefined
  readonly externalId?: string | undefined
}

/** The customer a request names, by the one rule: `customerId` wins over `externalId`; neither is a 400. */
export type NamedCustomer =
  | { readonly _tag: "ById"; readonly customerId: string }
  | { readonly _tag: "ByExternalId"; readonly externalId: string }

export const namedCustomer = (ref: CustomerRef): Either.Either<NamedCustomer, CustomerRefMissing> =>
  ref.customerId !== undefined
    ? Either.right({ _tag: "ById", customerId: ref.customerId })
    : ref.externalId !== undefined
    ? Either.right({ _tag: "ByExternalId", externalId: ref.externalId })
    : Either.left(new CustomerRefMissing({ message: "customerId or externalId must be provided" }))
