/**
 * The service's typed failures, each named for what happened, and the one
 * table of the status each is reported with. Services fail with these and know
 * nothing of HTTP. The API edge (src/http/ApiErrors.ts `toApiError`, read by
 * `forOrganization` and `failureAnswer`), the CLI's exit codes and the worker
 * (a refused signal's `error_status`) all read `errorStatus`, so a refusal has
 * the same status whichever door reports it.
 *
 * A name is a stable, PascalCase tag: the machine-readable code every error
 * answer carries (`statusDetail.code`) is derived from it (`codeOf`:
 * `ExternalIdTaken` -> `external_id_taken`; docs/api.md "Error codes", whose
 * table is made from this file), so a name says what happened, never which
 * status answers it, and is not renamed lightly. Its doc comment is its line in
 * that table. `message` is the text a person reads, as the wire carries it.
 */
import { Data } from "effect"

interface Message {
  readonly message: string
}

/**
 * One problem of a request that fails validation: where it is and what is
 * wrong. `field` is a body field's path (`email`, `entitlements.0.quantity`),
 * a query or path parameter's name, or null when the problem is the request
 * as a whole (a body that is not an object, nested too deep, a malformed path).
 */
export interface FieldProblem {
  readonly field: string | null
  readonly message: string
}

// The request itself

/**
 * The request fails its schema (a body, path or query field missing, mistyped, out of range or not taken by the
 * operation; a signal's timestamp more than 5 minutes ahead; a batch of no signal or more than 1,000), the body breaks
 * a body rule (nested deeper than 64 levels, a lone surrogate or NUL character), or the path is not valid
 * percent-encoding. `statusDetail.errors` names every problem with its field.
 */
export class ValidationFailed extends Data.TaggedError("ValidationFailed")<{
  readonly message: string
  /** Every problem found, each with its field; the message names the first few. */
  readonly errors?: ReadonlyArray<FieldProblem>
}> {}

// Organisations and API keys

/** No organisation with that id. */
export class OrganizationNotFound extends Data.TaggedError("OrganizationNotFound")<Message> {}

/** A name, currency or setting of an organisation outside its allowed form or range. */
export class InvalidOrganizationSettings extends Data.TaggedError("InvalidOrganizationSettings")<Message> {}

/** An explicit organisation that is not the API key's. */
export class OrganizationMismatch extends Data.TaggedError("OrganizationMismatch")<Message> {}

/** The API key is missing, unknown, revoked or expired. */
export class ApiKeyRefused extends Data.TaggedError("ApiKeyRefused")<Message> {}

/** No API key with that id in the organisation. */
export class ApiKeyNotFound extends Data.TaggedError("ApiKeyNotFound")<Message> {}

/** The API key to revoke is the one the request is made with: another key of the organisation (or the CLI) revokes it. */
export class ApiKeyInUse extends Data.TaggedError("ApiKeyInUse")<Message> {}

/** A new API key's expiry that is not in the future: the key would be refused from its first request. */
export class ApiKeyExpiryInPast extends Data.TaggedError("ApiKeyExpiryInPast")<Message> {}

// Customers and members

/** No customer with that id (or active one with that externalId) in the workspace. */
export class CustomerNotFound extends Data.TaggedError("CustomerNotFound")<Message> {}

/** The customer is archived: read-only, and it receives no more usage. */
export class CustomerArchived extends Data.TaggedError("CustomerArchived")<Message> {}

/** A request that must name a customer gave neither customerId nor externalId. */
export class CustomerRefMissing extends Data.TaggedError("CustomerRefMissing")<Message> {}

/** Another active customer holds the externalId. */
export class ExternalIdTaken extends Data.TaggedError("ExternalIdTaken")<Message> {}

/** No member with that id on the customer. */
export class MemberNotFound extends Data.TaggedError("MemberNotFound")<Message> {}

/** The member named by a signal is not a member of the customer. */
export class UnknownMember extends Data.TaggedError("UnknownMember")<Message> {}

/** The customer already has a member with that e-mail. */
export class MemberEmailTaken extends Data.TaggedError("MemberEmailTaken")<Message> {}

// The catalogue: models, credits, outcomes, units, composites

/** No model with that id in the workspace. */
export class ModelNotFound extends Data.TaggedError("ModelNotFound")<Message> {}

/** The model is not enabled in the workspace. */
export class ModelNotEnabled extends Data.TaggedError("ModelNotEnabled")<Message> {}

/** A model sent for the first time without name, input and output rates. */
export class NewModelIncomplete extends Data.TaggedError("NewModelIncomplete")<Message> {}

/** Another request created the same model at the same moment. */
export class ModelCreatedConcurrently extends Data.TaggedError("ModelCreatedConcurrently")<Message> {}

/** A model bundle whose weights the models cannot price. */
export class InvalidModelBundle extends Data.TaggedError("InvalidModelBundle")<Message> {}

/** No credit with that id in the workspace. */
export class CreditNotFound extends Data.TaggedError("CreditNotFound")<Message> {}

/** No outcome with that id in the workspace. */
export class OutcomeNotFound extends Data.TaggedError("OutcomeNotFound")<Message> {}

/** No unit with that id in the workspace. */
export class UnitNotFound extends Data.TaggedError("UnitNotFound")<Message> {}

/** No composite with that id (or live composite with that refId) in the workspace. */
export class CompositeNotFound extends Data.TaggedError("CompositeNotFound")<Message> {}

/** Another active credit, outcome or unit holds the agentKey. */
export class AgentKeyTaken extends Data.TaggedError("AgentKeyTaken")<Message> {}

/** A step agentKey another active outcome's step holds. */
export class StepAgentKeyTaken extends Data.TaggedError("StepAgentKeyTaken")<Message> {}

/** Two steps of one outcome with the same agentKey: a signal could not tell them apart. */
export class StepAgentKeyRepeated extends Data.TaggedError("StepAgentKeyRepeated")<Message> {}

/** A change of an outcome's steps that does not say which steps it keeps, adds or how. */
export class InvalidOutcomeSteps extends Data.TaggedError("InvalidOutcomeSteps")<Message> {}

/** Another active composite holds the refId. */
export class RefIdTaken extends Data.TaggedError("RefIdTaken")<Message> {}

/** A composite naming no credit, outcome or unit. */
export class EmptyComposite extends Data.TaggedError("EmptyComposite")<Message> {}

/** A unit's pricing type, flat price and tiers that do not fit together. */
export class InvalidUnitPricing extends Data.TaggedError("InvalidUnitPricing")<Message> {}

/** A composite or plan names catalogue ids that are not the organisation's. */
export class UnknownCatalogueItem extends Data.TaggedError("UnknownCatalogueItem")<Message> {}

/** A composite or plan names an archived catalogue record, which cannot be sold anew. */
export class CatalogueItemArchived extends Data.TaggedError("CatalogueItemArchived")<Message> {}

// Plans and purchases

/** No plan with that id in the workspace. */
export class PlanNotFound extends Data.TaggedError("PlanNotFound")<Message> {}

/** A component of a plan's entitlements that cannot be sold as given. */
export class InvalidPlanComponent extends Data.TaggedError("InvalidPlanComponent")<Message> {}

/** A plan funding its arrears from the wallet without the components that needs. */
export class InvalidWalletFunding extends Data.TaggedError("InvalidWalletFunding")<Message> {}

/** A price adjustment that would make the plan cost less than nothing. */
export class NegativePlanCost extends Data.TaggedError("NegativePlanCost")<Message> {}

/** A purchase names a plan the workspace does not have. */
export class UnknownPlan extends Data.TaggedError("UnknownPlan")<Message> {}

/** A purchase names an archived plan, which cannot be bought. */
export class PlanInactive extends Data.TaggedError("PlanInactive")<Message> {}

/** No purchase with that id in the workspace. */
export class PurchaseNotFound extends Data.TaggedError("PurchaseNotFound")<Message> {}

/** A purchase's billing date before today. */
export class BillingDateInPast extends Data.TaggedError("BillingDateInPast")<Message> {}

/** The customer already has a scheduled or active purchase. */
export class PurchaseAlreadyHeld extends Data.TaggedError("PurchaseAlreadyHeld")<Message> {}

/** The purchase is cancelled: it cannot be changed or cancelled again. */
export class PurchaseCancelled extends Data.TaggedError("PurchaseCancelled")<Message> {}

/** The purchase has no plan change waiting for its cycle end. */
export class NoScheduledChange extends Data.TaggedError("NoScheduledChange")<Message> {}

/** The customer has no ACTIVE purchase to meter or adjust against. */
export class NoActivePlan extends Data.TaggedError("NoActivePlan")<Message> {}

/**
 * The customer has a plan now, but none was active at the signal's moment (its timestamp, or when it was received
 * or queued again): usage from before a purchase is not billed by it.
 */
export class NoPlanAtSignalTime extends Data.TaggedError("NoPlanAtSignalTime")<Message> {}

/** The target exists but the customer's plan neither sells it nor covers it by a composite it sells. */
export class NotOnPlan extends Data.TaggedError("NotOnPlan")<Message> {}

/** An adjustment of a part of the plan that is not prepaid (ADVANCE): only prepaid balances move. */
export class NotPrepaid extends Data.TaggedError("NotPrepaid")<Message> {}

/** The Reserved Wallet is switched off in the workspace. */
export class ReservedWalletDisabled extends Data.TaggedError("ReservedWalletDisabled")<Message> {}

// Invoices, payments and taxes

/** No invoice with that id in the workspace. */
export class InvoiceNotFound extends Data.TaggedError("InvoiceNotFound")<Message> {}

/** The invoice is not OPEN (a DRAFT, PAID or VOID one), so it cannot be paid, voided or linked to. */
export class InvoiceNotOpen extends Data.TaggedError("InvoiceNotOpen")<Message> {}

/** The invoice is a DRAFT or VOID: only an OPEN or PAID invoice takes a credit note. */
export class InvoiceNotCreditable extends Data.TaggedError("InvoiceNotCreditable")<Message> {}

/**
 * A credit note for more than remains to credit: the invoice's total less its
 * earlier credit notes, or a line's amount less what earlier notes credited on it.
 */
export class CreditExceedsRemaining extends Data.TaggedError("CreditExceedsRemaining")<Message> {}

/** A credit note names a line the invoice does not have (lines count from 1). */
export class UnknownInvoiceLine extends Data.TaggedError("UnknownInvoiceLine")<Message> {}

/** A credit note whose lines come to less than a cent. */
export class CreditNoteEmpty extends Data.TaggedError("CreditNoteEmpty")<Message> {}

/** No payment with that id in the workspace. */
export class PaymentNotFound extends Data.TaggedError("PaymentNotFound")<Message> {}

/** No tax with that id in the workspace. */
export class TaxNotFound extends Data.TaggedError("TaxNotFound")<Message> {}

/** A tax rate outside 0 to 100 percent. */
export class InvalidTaxRate extends Data.TaggedError("InvalidTaxRate")<Message> {}

// Signals and usage

/** A signal's timestamp older than the workspace's late-usage window. */
export class TimestampTooOld extends Data.TaggedError("TimestampTooOld")<Message> {}

/** An idempotency key sent again with a different request. */
export class IdempotencyKeyReused extends Data.TaggedError("IdempotencyKeyReused")<Message> {}

/** An `Idempotency-Key` whose first request is still running after the repeat waited for it: retry shortly. */
export class IdempotencyKeyInUse extends Data.TaggedError("IdempotencyKeyInUse")<Message> {}

/** The agentKey (or composite refId, or run) names nothing live in the workspace. */
export class UnknownTarget extends Data.TaggedError("UnknownTarget")<Message> {}

/** The ADVANCE allowance cannot cover the usage and the plan has no ARREAR component to overflow to. */
export class OutOfAllowance extends Data.TaggedError("OutOfAllowance")<Message> {}

/** The usage itself cannot be metered (a quantity not above zero). */
export class InvalidUsage extends Data.TaggedError("InvalidUsage")<Message> {}

/** No outcome run with that id has a step of the customer. */
export class OutcomeRunNotFound extends Data.TaggedError("OutcomeRunNotFound")<Message> {}

/** The outcome run has been completed already. */
export class OutcomeRunCompleted extends Data.TaggedError("OutcomeRunCompleted")<Message> {}

/** A composite occurrence that still waits for members: it completes itself once they arrive. */
export class CompositeIncomplete extends Data.TaggedError("CompositeIncomplete")<Message> {}

/** No signal with that id in the workspace. */
export class SignalNotFound extends Data.TaggedError("SignalNotFound")<Message> {}

/** A signal that was billed already: replaying it would bill it twice. */
export class SignalAlreadyProcessed extends Data.TaggedError("SignalAlreadyProcessed")<Message> {}

/** No usage-log row with that id in the workspace. */
export class UsageRowNotFound extends Data.TaggedError("UsageRowNotFound")<Message> {}

/** The usage-log row is itself a reversal. */
export class UsageRowIsReversal extends Data.TaggedError("UsageRowIsReversal")<Message> {}

/** The usage-log row has been reversed already. */
export class UsageAlreadyReversed extends Data.TaggedError("UsageAlreadyReversed")<Message> {}

/** The usage-log row's split, or its ended cycle's record, is not known, so it cannot be reversed exactly. */
export class UsageNotReversible extends Data.TaggedError("UsageNotReversible")<Message> {}

// Spend holds

/** No spend hold with that id in the workspace. */
export class ReservationNotFound extends Data.TaggedError("ReservationNotFound")<Message> {}

// Webhooks

/** No live webhook endpoint with that id in the workspace. */
export class WebhookEndpointNotFound extends Data.TaggedError("WebhookEndpointNotFound")<Message> {}

/** The delivery's endpoint has been removed. */
export class WebhookEndpointRemoved extends Data.TaggedError("WebhookEndpointRemoved")<Message> {}

/** The delivery's endpoint is disabled. */
export class WebhookEndpointDisabled extends Data.TaggedError("WebhookEndpointDisabled")<Message> {}

/** No webhook delivery with that id in the workspace. */
export class WebhookDeliveryNotFound extends Data.TaggedError("WebhookDeliveryNotFound")<Message> {}

/** No webhook event with that id in the workspace. */
export class WebhookEventNotFound extends Data.TaggedError("WebhookEventNotFound")<Message> {}

/** A time range whose start is not before its end. */
export class InvalidTimeRange extends Data.TaggedError("InvalidTimeRange")<Message> {}

/**
 * A usage summary over more windows than its window size allows, or with more rows than one answer holds
 * (docs/signals.md "Usage summaries").
 */
export class SummaryTooLarge extends Data.TaggedError("SummaryTooLarge")<Message> {}

/** A webhook URL not of the accepted form. */
export class InvalidWebhookUrl extends Data.TaggedError("InvalidWebhookUrl")<Message> {}

// Lists

/** A list's `cursor` that names no row of that list (malformed, another list's, or unknown). */
export class UnknownCursor extends Data.TaggedError("UnknownCursor")<Message> {}

// Rate limits

/** The API key spent its route family's tokens (docs/api.md "Rate limits"); nothing of the request was done. */
export class RateLimited extends Data.TaggedError("RateLimited")<Message> {}

// Fixtures

/** A fixture document names a catalogue record or plan the workspace has no active one of. */
export class FixtureTargetNotFound extends Data.TaggedError("FixtureTargetNotFound")<Message> {}

/** Every failure a service reports. */
export type ServiceError =
  | ValidationFailed
  | OrganizationNotFound
  | InvalidOrganizationSettings
  | OrganizationMismatch
  | ApiKeyRefused
  | ApiKeyNotFound
  | ApiKeyInUse
  | ApiKeyExpiryInPast
  | CustomerNotFound
  | CustomerArchived
  | CustomerRefMissing
  | ExternalIdTaken
  | MemberNotFound
  | UnknownMember
  | MemberEmailTaken
  | ModelNotFound
  | ModelNotEnabled
  | NewModelIncomplete
  | ModelCreatedConcurrently
  | InvalidModelBundle
  | CreditNotFound
  | OutcomeNotFound
  | UnitNotFound
  | CompositeNotFound
  | AgentKeyTaken
  | StepAgentKeyTaken
  | StepAgentKeyRepeated
  | InvalidOutcomeSteps
  | RefIdTaken
  | EmptyComposite
  | InvalidUnitPricing
  | UnknownCatalogueItem
  | CatalogueItemArchived
  | PlanNotFound
  | InvalidPlanComponent
  | InvalidWalletFunding
  | NegativePlanCost
  | UnknownPlan
  | PlanInactive
  | PurchaseNotFound
  | BillingDateInPast
  | PurchaseAlreadyHeld
  | PurchaseCancelled
  | NoScheduledChange
  | NoActivePlan
  | NoPlanAtSignalTime
  | NotOnPlan
  | NotPrepaid
  | ReservedWalletDisabled
  | InvoiceNotFound
  | InvoiceNotOpen
  | InvoiceNotCreditable
  | CreditExceedsRemaining
  | UnknownInvoiceLine
  | CreditNoteEmpty
  | PaymentNotFound
  | TaxNotFound
  | InvalidTaxRate
  | TimestampTooOld
  | IdempotencyKeyReused
  | IdempotencyKeyInUse
  | UnknownTarget
  | OutOfAllowance
  | InvalidUsage
  | OutcomeRunNotFound
  | OutcomeRunCompleted
  | CompositeIncomplete
  | SignalNotFound
  | SignalAlreadyProcessed
  | UsageRowNotFound
  | UsageRowIsReversal
  | UsageAlreadyReversed
  | UsageNotReversible
  | ReservationNotFound
  | WebhookEndpointNotFound
  | WebhookEndpointRemoved
  | WebhookEndpointDisabled
  | WebhookDeliveryNotFound
  | WebhookEventNotFound
  | InvalidTimeRange
  | SummaryTooLarge
  | InvalidWebhookUrl
  | UnknownCursor
  | RateLimited
  | FixtureTargetNotFound

/** Why a signal was not billed: what the meters and the worker refuse a signal with. */
export type Refusal =
  | CustomerNotFound
  | CustomerArchived
  | UnknownMember
  | NoActivePlan
  | NoPlanAtSignalTime
  | UnknownTarget
  | ModelNotEnabled
  | NotOnPlan
  | OutOfAllowance
  | InvalidUsage

export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 422 | 429

/**
 * The status of every failure a client can cause: the one place a status is
 * chosen. 400 the request itself is wrong; 401/403 the key; 404 the record is
 * missing (or another organisation's, on purpose indistinguishable); 409 it
 * clashes with the current state; 422 well-formed but not applicable now;
 * 429 too many requests for the key's rate limit (retry after a while).
 */
export const errorStatus: Record<ServiceError["_tag"], ErrorStatus> = {
  ValidationFailed: 400,
  OrganizationNotFound: 404,
  InvalidOrganizationSettings: 400,
  OrganizationMismatch: 403,
  ApiKeyRefused: 401,
  ApiKeyNotFound: 404,
  ApiKeyInUse: 409,
  ApiKeyExpiryInPast: 400,
  CustomerNotFound: 404,
  CustomerArchived: 409,
  CustomerRefMissing: 400,
  ExternalIdTaken: 409,
  MemberNotFound: 404,
  UnknownMember: 422,
  MemberEmailTaken: 409,
  ModelNotFound: 404,
  ModelNotEnabled: 422,
  NewModelIncomplete: 400,
  ModelCreatedConcurrently: 409,
  InvalidModelBundle: 400,
  CreditNotFound: 404,
  OutcomeNotFound: 404,
  UnitNotFound: 404,
  CompositeNotFound: 404,
  AgentKeyTaken: 409,
  StepAgentKeyTaken: 409,
  StepAgentKeyRepeated: 409,
  InvalidOutcomeSteps: 400,
  RefIdTaken: 409,
  EmptyComposite: 400,
  InvalidUnitPricing: 400,
  UnknownCatalogueItem: 400,
  CatalogueItemArchived: 409,
  PlanNotFound: 404,
  InvalidPlanComponent: 400,
  InvalidWalletFunding: 400,
  NegativePlanCost: 400,
  UnknownPlan: 400,
  PlanInactive: 400,
  PurchaseNotFound: 404,
  BillingDateInPast: 400,
  PurchaseAlreadyHeld: 409,
  PurchaseCancelled: 409,
  NoScheduledChange: 404,
  NoActivePlan: 422,
  NoPlanAtSignalTime: 422,
  NotOnPlan: 422,
  NotPrepaid: 422,
  ReservedWalletDisabled: 422,
  InvoiceNotFound: 404,
  InvoiceNotOpen: 409,
  InvoiceNotCreditable: 409,
  CreditExceedsRemaining: 422,
  UnknownInvoiceLine: 422,
  CreditNoteEmpty: 422,
  PaymentNotFound: 404,
  TaxNotFound: 404,
  InvalidTaxRate: 400,
  TimestampTooOld: 422,
  IdempotencyKeyReused: 422,
  IdempotencyKeyInUse: 409,
  UnknownTarget: 422,
  OutOfAllowance: 422,
  InvalidUsage: 400,
  OutcomeRunNotFound: 404,
  OutcomeRunCompleted: 409,
  CompositeIncomplete: 422,
  SignalNotFound: 404,
  SignalAlreadyProcessed: 409,
  ReservationNotFound: 404,
  UsageRowNotFound: 404,
  UsageRowIsReversal: 409,
  UsageAlreadyReversed: 409,
  UsageNotReversible: 409,
  WebhookEndpointNotFound: 404,
  WebhookEndpointRemoved: 409,
  WebhookEndpointDisabled: 409,
  WebhookDeliveryNotFound: 404,
  WebhookEventNotFound: 404,
  InvalidTimeRange: 400,
  SummaryTooLarge: 400,
  InvalidWebhookUrl: 400,
  UnknownCursor: 400,
  RateLimited: 429,
  FixtureTargetNotFound: 400
}

export const isServiceError = (u: unknown): u is ServiceError =>
  typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" && Object.hasOwn(errorStatus, u._tag) &&
  "message" in u

/**
 * `ExternalIdTaken` -> `external_id_taken`, at the type level: the codes a
 * door may send are checked by the compiler against the names they come from.
 */
type SnakeOf<S extends string, Done extends string = ""> = S extends `${infer C}${infer Rest}`
  ? SnakeOf<Rest, `${Done}${C extends Lowercase<C> ? C : Done extends "" ? Lowercase<C> : `_${Lowercase<C>}`}`>
  : Done

/** The machine-readable code of a failure named `Tag`: its snake_case (`statusDetail.code`, docs/api.md). */
export type CodeOf<Tag extends string> = SnakeOf<Tag>

/** The code of a name: derived, never listed, so a new error has its code the moment it has its name. */
export const codeOf = <Tag extends string>(tag: Tag): CodeOf<Tag> =>
  tag.replace(/(?<!^)[A-Z]/g, (letter) => `_${letter}`).toLowerCase() as CodeOf<Tag>

/** The code of every service error. */
export type ServiceErrorCode = CodeOf<ServiceError["_tag"]>
