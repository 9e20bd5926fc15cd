/**
 * What the customer's two pages show, read for the one customer a token
 * names: the portal (plan, cycle, what is owed, the upcoming invoices,
 * balances and what is held of them, usage per day, latest usage, invoices)
 * and a hosted invoice. Read-only; every query is scoped by the token's
 * organisation and customer, so no URL reaches anyone else's data.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Either, Option, Schema } from "effect"
import { type Allowance, Balances } from "../billing/Balances.ts"
import type { Invoice } from "../billing/Invoice.ts"
import { Invoices } from "../billing/Invoices.ts"
import { Purchases } from "../billing/Purchases.ts"
import { Customers } from "../customers/Customers.ts"
import { findAll } from "../db/Sql.ts"
import { Entitlements } from "../entitlements/Entitlements.ts"
import { type Decimal, sum } from "../money.ts"
import { billingContactOf, Organizations } from "../organizations/Organizations.ts"
import type { SnapshotComponent } from "../pricing/PlanSnapshot.ts"
import { type DailyUsage, UsageLog } from "../usage/UsageLog.ts"
import { type SummaryWindow, UsageSummary } from "../usage/UsageSummary.ts"
import type { UsageRecord } from "../usage/UsageLogEntry.ts"
import { invoicePath, InvoiceLinkClaims } from "../links/InvoiceLinks.ts"
import { amountDueOf, type HeldAmount, heldAmounts } from "./Amounts.ts"
import { type UnitPriceShown, unitPriceShown } from "../billing/LineUnitPrice.ts"
import { Portal } from "./Portal.ts"
import { checkToken, claimedOrganization, type TokenRefusal } from "../links/SignedToken.ts"
import { SigningKeys } from "../links/SigningKeys.ts"
import { type CustomerId, type OrganizationId, type PurchaseId } from "../ids.ts"
import { givenOrCurrentTime } from "../time.ts"
import { Timestamp } from "../schema.ts"

/** How many usage rows and invoices the portal lists. */
export const PORTAL_LATEST_USAGE = 10
export const PORTAL_INVOICES = 24
/** Without a current cycle the chart shows this many days up to today. */
export const PORTAL_DAYS_WITHOUT_PLAN = 30
/** How many OPEN invoices the portal lists under "What you owe" (the oldest first); more are counted, not listed. */
export const PORTAL_OPEN_INVOICES = 24
/** How many ended cycles the usage chart offers, the latest first. */
export const PORTAL_PREVIOUS_CYCLES = 6
/** A range of more days than this is charted by month. */
export const PORTAL_MAX_CHART_DAYS = 62

/**
 * What the usage chart shows (`?usage=` on the portal's link): the current
 * cycle (by default, and for any value it does not know: a person's URL is
 * not refused), one of the latest ended cycles (`cycle-1` the previous one,
 * up to `cycle-6`), or the last 12 months by month (`12-months`).
 */
export type UsageRange =
  | { readonly kind: "cycle" }
  | { readonly kind: "previous"; readonly back: number }
  | { readonly kind: "months" }

export const usageRangeOf = (text: string | null | undefined): UsageRange => {
  if (text === "12-months") return { kind: "months" }
  const previous = /^cycle-([1-9])$/.exec(text ?? "")
  if (previous !== null && Number(previous[1]) <= PORTAL_PREVIOUS_CYCLES) return { kind: "previous", back: Number(previous[1]) }
  return { kind: "cycle" }
}

const usageRangeKey = (range: UsageRange) =>
  range.kind === "months" ? "12-months" : range.kind === "previous" ? `cycle-${range.back}` : "cycle"

/** One choice of the chart's range, with the link that shows it. */
export interface UsageRangeChoice {
  readonly range: UsageRange
  /** The ended cycle's period, for its label. */
  readonly period?: { readonly start: Date; readonly end: Date }
  readonly href: string
  readonly current: boolean
}

/** The usage chart: its range, its periods (UTC days, YYYY-MM-DD, or months, YYYY-MM) and the costs in them. */
export interface UsageChartView {
  readonly range: UsageRange
  readonly from: Date
  readonly to: Date
  readonly granularity: "day" | "month"
  readonly periods: ReadonlyArray<string>
  /** Customer cost per period (`day` holds the period's key) and meter, from the usage summary. */
  readonly points: ReadonlyArray<DailyUsage>
  readonly choices: ReadonlyArray<UsageRangeChoice>
}

export type PageRefusal = TokenRefusal | "NotFound"

export interface CustomerHeader {
  readonly organizationName: string
  readonly customerName: string
  readonly customerEmail: string
}

/** An invoice the portal lists, with the link to its hosted page. */
export interface LinkedInvoice {
  readonly invoice: Invoice
  readonly href: string
}

/** What the cycle job would issue at the customer's next step (`Purchases.upcoming`): never stored, no id or number. */
export type UpcomingInvoice = Omit<Invoice, "id" | "number">

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
  /** The customer's active holds, one entry per balance they keep back, wallet first. */
  readonly held: ReadonlyArray<HeldAmount>
  /** Every OPEN invoice (oldest first, at most PORTAL_OPEN_INVOICES listed) and what they leave to pay. */
  readonly owed: {
    readonly invoices: ReadonlyArray<LinkedInvoice>
    readonly count: number
    readonly amountDue: Decimal
    readonly overdue: number
  }
  readonly upcoming: ReadonlyArray<UpcomingInvoice>
  readonly usage: UsageChartView
  readonly latestUsage: ReadonlyArray<UsageRecord>
  readonly invoices: ReadonlyArray<LinkedInvoice>
  readonly expiresAt: Date
}

/** Who the customer contacts about an invoice: the organisation's billing contact, when it set one. */
export interface BillingContact {
  readonly email: string | null
  readonly addressLines: ReadonlyArray<string>
}

export interface InvoicePageView extends CustomerHeader {
  readonly invoice: Invoice
  readonly paymentInstructions: string | null
  readonly contact: BillingContact
  /** What each of `invoice.lines` shows as its unit price, in the same order. */
  readonly unitPrices: ReadonlyArray<UnitPriceShown>
}

const DAY = 86_400_000
const startOfUtcDay = (date: Date) => Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate())

/** The UTC days from the one holding `from` to the one holding the instant before `to`. */
export const utcDays = (from: Date, to: Date): Array<string> => {
  const days: Array<string> = []
  for (let day = startOfUtcDay(from); day < to.getTime() && days.length < PORTAL_MAX_CHART_DAYS; day += DAY) {
    days.push(new Date(day).toISOString().slice(0, 10))
  }
  return days
}

/** The UTC months (YYYY-MM) from the one holding `from` to the one holding the instant before `to`. */
export const utcMonths = (from: Date, to: Date): Array<string> => {
  const months: Array<string> = []
  for (
    let month = Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), 1);
    month < to.getTime();
    month = Date.UTC(new Date(month).getUTCFullYear(), new Date(month).getUTCMonth() + 1, 1)
  ) {
    months.push(new Date(month).toISOString().slice(0, 7))
  }
  return months
}

const EndedCycle = Schema.Struct({ periodStart: Timestamp, periodEnd: Timestamp })

/** A page whose organisation, customer, purchase or invoice is gone answers as if the address named nothing. */
const notFoundPage = () => Effect.succeed(Either.left<PageRefusal>("NotFound"))

const InvoiceIdRow = Schema.Struct({ id: Schema.String })

export class PortalView extends Effect.Service<PortalView>()("PortalView", {
  dependencies: [
    Customers.Default,
    Balances.Default,
    Invoices.Default,
    SigningKeys.Default,
    Purchases.Default,
    Organizations.Default,
    Portal.Default,
    UsageLog.Default,
    UsageSummary.Default,
    Entitlements.Default
  ],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const portal = yield* Portal
    const keys = yield* SigningKeys
    const organizations = yield* Organizations
    const customers = yield* Customers
    const balances = yield* Balances
    const purchases = yield* Purchases
    const usage = yield* UsageLog
    const summaries = yield* UsageSummary
    const invoices = yield* Invoices
    const entitlements = yield* Entitlements

    /**
     * The customer's OPEN invoices, oldest first: the ids (every one, to count
     * them) read here, scoped by organisation and customer, then each invoice
     * as the billing service answers it. No service lists invoices by status.
     */
    const openInvoices = (organizationId: OrganizationId, customerId: CustomerId) =>
      Effect.gen(function*() {
        const ids = yield* findAll(
          InvoiceIdRow,
          sql`SELECT id FROM invoices WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
                AND status = 'OPEN' ORDER BY id`
        )
        // Invoices are never deleted: an id just read names an invoice.
        const listed = yield* Effect.orDie(
          Effect.forEach(ids.slice(0, PORTAL_OPEN_INVOICES), ({ id }) => invoices.get(organizationId, id))
        )
        return { listed, count: ids.length }
      })

    /** The plan snapshot's components of an invoice's purchase, to price its unit lines; none when it has no purchase. */
    const componentsOfPurchase = (organizationId: OrganizationId, purchaseId: string | null) =>
      purchaseId === null
        ? Effect.succeed([] as ReadonlyArray<SnapshotComponent>)
        : purchases.get(organizationId, purchaseId as PurchaseId).pipe(
          Effect.map((purchase) => purchase.snapshot.components),
          Effect.catchTag("PurchaseNotFound", () => Effect.succeed([] as ReadonlyArray<SnapshotComponent>))
        )

    /**
     * The usage chart of `range`: its periods and the customer cost per
     * period and meter, added up by the usage summary (src/usage/UsageSummary.ts),
     * by day, or by month for the 12 months and a range of more than
     * PORTAL_MAX_CHART_DAYS days. The current cycle is `current` (the last 30
     * days without a plan); ended cycles are the customer's recorded ones,
     * of every purchase, the latest first.
     */
    const usageChart = (
      organizationId: OrganizationId,
      customerId: CustomerId,
      range: UsageRange,
      current: { readonly from: Date; readonly to: Date },
      now: Date,
      token: string
    ) =>
      Effect.gen(function*() {
        const ended = yield* findAll(
          EndedCycle,
          sql`SELECT period_start, period_end FROM purchase_cycles
              WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
              ORDER BY period_start DESC LIMIT ${PORTAL_PREVIOUS_CYCLES}`
        )
        // An ended cycle asked for that the customer does not have (yet) is the current one.
        const shown: UsageRange = range.kind === "previous" && ended[range.back - 1] === undefined ? { kind: "cycle" } : range
        const { from, to } = shown.kind === "months"
          ? { from: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 11, 1)), to: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)) }
          : shown.kind === "previous"
          ? { from: ended[shown.back - 1]!.periodStart, to: ended[shown.back - 1]!.periodEnd }
          : current
        const byMonth = shown.kind === "months" || to.getTime() - startOfUtcDay(from) > PORTAL_MAX_CHART_DAYS * DAY
        const window: SummaryWindow = byMonth ? "MONTH" : "DAY"
        // At most 36 months a summary: a longer cycle is charted over its last 36.
        const since = byMonth ? new Date(Math.max(from.getTime(), Date.UTC(to.getUTCFullYear(), to.getUTCMonth() - 35, 1))) : from
        const rows = yield* summaries.summarize(organizationId, { customerId, from: since, to, window, groupBy: ["meter"] }).pipe(
          Effect.catchTags({
            InvalidTimeRange: () => Effect.succeed([]),
            SummaryTooLarge: () => Effect.succeed([]),
            // Named by its id: never an externalId to refuse.
            ValidationFailed: Effect.die
          })
        )
        const keyOf = (start: Date) => start.toISOString().slice(0, byMonth ? 7 : 10)
        const link = (choice: UsageRange) => `?token=${encodeURIComponent(token)}&usage=${usageRangeKey(choice)}`
        const choices: Array<UsageRangeChoice> = [
          { range: { kind: "cycle" }, href: link({ kind: "cycle" }), current: shown.kind === "cycle" },
          ...ended.map((cycle, index): UsageRangeChoice => ({
            range: { kind: "previous", back: index + 1 },
            period: { start: cycle.periodStart, end: cycle.periodEnd },
            href: link({ kind: "previous", back: index + 1 }),
            current: shown.kind === "previous" && shown.back === index + 1
          })),
          { range: { kind: "months" }, href: link({ kind: "months" }), current: shown.kind === "months" }
        ]
        return {
          range: shown,
          from,
          to,
          granularity: byMonth ? "month" : "day",
          periods: byMonth ? utcMonths(since, to) : utcDays(from, to),
          points: rows.map((row) => ({ day: keyOf(row.windowStart), meter: String(row.groups[0]![1]), customerCost: row.cost })),
          choices
        } satisfies UsageChartView
      }).pipe(Effect.withSpan("PortalView.usageChart"))

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

    const portalPage = (token: string, at?: Date, range: UsageRange = { kind: "cycle" }) =>
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
        const open = yield* openInvoices(org, customerId)
        const link = (invoice: Invoice): LinkedInvoice => ({
          invoice,
          href: invoicePath(secret, { org, customerId, invoiceId: invoice.id, exp })
        })
        // Named by its id, the customer was just read: no reference to miss or refuse.
        const holds = yield* Effect.orDie(entitlements.activeHolds(org, customerId))
        const upcoming = yield* Effect.orDie(purchases.upcoming(org, { customerId }))
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
          held: heldAmounts(holds, purchase?.snapshot.components ?? []),
          owed: {
            invoices: open.listed.map(link),
            count: open.count,
            amountDue: sum(open.listed.map(amountDueOf)),
            overdue: open.listed.filter((invoice) => invoice.overdue).length
          },
          upcoming,
          usage: yield* usageChart(org, customerId, range, { from, to }, now, token),
          latestUsage: yield* usage.latest(org, customerId, PORTAL_LATEST_USAGE),
          invoices: listed.map(link),
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
        const components = yield* componentsOfPurchase(claims.org, invoice.purchaseId)
        return Either.right<InvoicePageView>({
          ...names,
          invoice,
          paymentInstructions: organization.paymentInstructions,
          contact: billingContactOf(organization),
          unitPrices: invoice.lines.map((line) => unitPriceShown(line, components))
        })
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
