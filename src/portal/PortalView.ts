/**
 * What the customer's two pages show, read for the one customer a token
 * names: the portal (plan, cycle, balances, usage per day, latest usage,
 * invoices) and a hosted invoice. Read-only; every query is scoped by the
 * token's organisation and customer, so no URL reaches anyone else's data.
 */
import { Effect, Either, Option } from "effect"
import { type Allowance, Balances } from "../billing/Balances.ts"
import type { Invoice } from "../billing/Invoice.ts"
import { Invoices } from "../billing/Invoices.ts"
import { Purchases } from "../billing/Purchases.ts"
import { Customers } from "../customers/Customers.ts"
import type { Decimal } from "../money.ts"
import { Organizations } from "../organizations/Organizations.ts"
import { type DailyUsage, UsageLog } from "../usage/UsageLog.ts"
import type { UsageRecord } from "../usage/UsageLogEntry.ts"
import { invoicePath, InvoiceLinkClaims } from "../links/InvoiceLinks.ts"
import { Portal } from "./Portal.ts"
import { checkToken, claimedOrganization, type TokenRefusal } from "../links/SignedToken.ts"
import { SigningKeys } from "../links/SigningKeys.ts"
import { type CustomerId, type OrganizationId } from "../ids.ts"
import { givenOrCurrentTime } from "../time.ts"

/** How many usage rows and invoices the portal lists. */
export const PORTAL_LATEST_USAGE = 10
export const PORTAL_INVOICES = 24
/** Without a current cycle the chart shows this many days up to today. */
export const PORTAL_DAYS_WITHOUT_PLAN = 30

export type PageRefusal = TokenRefusal | "NotFound"

export interface CustomerHeader {
  readonly organizationName: string
  readonly customerName: string
  readonly customerEmail: string
}

export interface PortalPageView extends CustomerHeader {
  readonly currencyCode: string
  readonly plan: {
    readonly name: string
    readonly status: string
    readonly billingCycle: string
    readonly cost: Decimal
    readonly periodStart: Date | null
    readonly periodEnd: Date | null
    readonly spentThisCycle: Decimal
  } | null
  readonly wallet: { readonly balance: Decimal; readonly reservedBalance: Decimal | null }
  readonly allowances: ReadonlyArray<Allowance>
  /** The chart's range: every UTC day (YYYY-MM-DD) of the cycle, and the costs in it. */
  readonly usageDays: ReadonlyArray<string>
  readonly dailyUsage: ReadonlyArray<DailyUsage>
  readonly latestUsage: ReadonlyArray<UsageRecord>
  readonly invoices: ReadonlyArray<{ readonly invoice: Invoice; readonly href: string }>
  readonly expiresAt: Date
}

export interface InvoicePageView extends CustomerHeader {
  readonly invoice: Invoice
  readonly paymentInstructions: string | null
}

const DAY = 86_400_000
const startOfUtcDay = (date: Date) => Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate())

/** The UTC days from the one holding `from` to the one holding the instant before `to`. */
export const utcDays = (from: Date, to: Date): Array<string> => {
  const days: Array<string> = []
  for (let day = startOfUtcDay(from); day < to.getTime() && days.length < 62; day += DAY) {
    days.push(new Date(day).toISOString().slice(0, 10))
  }
  return days
}

/** A page whose organisation, customer, purchase or invoice is gone answers as if the address named nothing. */
const notFoundPage = () => Effect.succeed(Either.left<PageRefusal>("NotFound"))

export class PortalView extends Effect.Service<PortalView>()("PortalView", {
  dependencies: [Customers.Default, Balances.Default, Invoices.Default, SigningKeys.Default, Purchases.Default, Organizations.Default, Portal.Default, UsageLog.Default],
  effect: Effect.gen(function*() {
    const portal = yield* Portal
    const keys = yield* SigningKeys
    const organizations = yield* Organizations
    const customers = yield* Customers
    const balances = yield* Balances
    const purchases = yield* Purchases
    const usage = yield* UsageLog
    const invoices = yield* Invoices

    const header = (organizationId: OrganizationId, customerId: CustomerId) =>
      Effect.gen(function*() {
        const organization = yield* organizations.get(organizationId)
        const customer = yield* customers.get(organizationId, customerId)
        return {
          organization,
          customer,
          header: { organizationName: organization.name, customerName: customer.name, customerEmail: customer.email }
        }
      })

    const portalPage = (token: string, at?: Date) =>
      Effect.gen(function*() {
        const now = yield* givenOrCurrentTime(at)
        const opened = yield* portal.open(token, now)
        if (Either.isLeft(opened)) return Either.left<PageRefusal>(opened.left)
        const { customerId, exp, org } = opened.right
        const { customer, header: names } = yield* header(org, customerId)
        const current = yield* balances.currentPlan(org, customerId)
        const money = yield* balances.balances(org, customerId)
        const purchase = current.plan === null ? null : yield* purchases.get(org, current.plan.purchaseId)
        const from = purchase?.periodStart ?? new Date(startOfUtcDay(now) - (PORTAL_DAYS_WITHOUT_PLAN - 1) * DAY)
        const to = purchase?.periodEnd ?? new Date(startOfUtcDay(now) + DAY)
        // Verifying the token found this secret; reading it again makes nothing (the page writes nothing).
        const secret = yield* Effect.flatMap(keys.existingSecretOf(org), Option.match({
          onNone: () => Effect.dieMessage(`signing key of ${org} vanished`),
          onSome: Effect.succeed
        }))
        const listed = yield* invoices.latestOfCustomer(org, customerId, PORTAL_INVOICES)
        return Either.right<PortalPageView>({
          ...names,
          currencyCode: customer.currencyCode,
          plan: current.plan === null ? null : {
            name: current.plan.planName,
            status: current.plan.status,
            billingCycle: current.plan.billingCycle,
            cost: current.plan.cost,
            periodStart: purchase?.periodStart ?? null,
            periodEnd: purchase?.periodEnd ?? null,
            spentThisCycle: current.plan.spentThisCycle
          },
          wallet: { balance: money.wallet.balance, reservedBalance: money.wallet.reservedBalance ?? null },
          allowances: yield* balances.allowances(org, customerId),
          usageDays: utcDays(from, to),
          dailyUsage: yield* usage.daily(org, customerId, { from, to }),
          latestUsage: yield* usage.latest(org, customerId, PORTAL_LATEST_USAGE),
          invoices: listed.map((invoice) => ({
            invoice,
            href: invoicePath(secret, { org, customerId, invoiceId: invoice.id, exp })
          })),
          expiresAt: new Date(exp)
        })
      }).pipe(
        Effect.catchTags({
          OrganizationNotFound: notFoundPage,
          CustomerNotFound: notFoundPage,
          PurchaseNotFound: notFoundPage
        })
      , Effect.withSpan("PortalView.portalPage"))

    const invoicePage = (invoiceId: string, token: string, at?: Date) =>
      Effect.gen(function*() {
        const now = yield* givenOrCurrentTime(at)
        const org = claimedOrganization("pl", token)
        if (Option.isNone(org)) return Either.left<PageRefusal>("Invalid")
        const secret = yield* keys.existingSecretOf(org.value)
        if (Option.isNone(secret)) return Either.left<PageRefusal>("Invalid")
        const checked = checkToken(secret.value, "pl", token, InvoiceLinkClaims, now)
        if (Either.isLeft(checked)) return Either.left<PageRefusal>(checked.left)
        const claims = checked.right
        // The path is not signed: a link whose path names another invoice was edited.
        if (claims.invoiceId !== invoiceId) return Either.left<PageRefusal>("Invalid")
        const invoice = yield* invoices.get(claims.org, claims.invoiceId)
        if (invoice.customerId !== claims.customerId) return Either.left<PageRefusal>("NotFound")
        const { header: names, organization } = yield* header(claims.org, claims.customerId)
        return Either.right<InvoicePageView>({ ...names, invoice, paymentInstructions: organization.paymentInstructions })
      }).pipe(
        Effect.catchTags({
          OrganizationNotFound: notFoundPage,
          CustomerNotFound: notFoundPage,
          InvoiceNotFound: notFoundPage
        })
      , Effect.withSpan("PortalView.invoicePage"))

    return { portalPage, invoicePage } as const
  })
}) {}
