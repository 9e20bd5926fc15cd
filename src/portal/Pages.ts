/**
 * The customer's pages: the portal, a hosted invoice, and the page a refused
 * link gets. Plain template functions over the views of PortalView.ts; one
 * small inline stylesheet, one tiny inline script (dates into the browser's
 * time zone), no client framework.
 */
import { BigDecimal } from "effect"
import { createHash } from "node:crypto"
import type { Allowance } from "../billing/Balances.ts"
import type { Invoice } from "../billing/Invoice.ts"
import { HUNDRED, sum, toNumber } from "../money.ts"
import { meterLabels, usageChart } from "./Chart.ts"
import { type Formats, isNegativeInCents } from "./Format.ts"
import { type Html, html, trusted } from "./Html.ts"
import { amountDueOf, type HeldAmount } from "./Amounts.ts"
import type { UnitPriceShown } from "../billing/LineUnitPrice.ts"
import type { InvoicePageView, PageRefusal, PortalPageView, UpcomingInvoice } from "./PortalView.ts"

const stylesheet = `
:root{--bg:#f4f5f7;--card:#fff;--text:#16181d;--muted:#555d6b;--line:#e1e4e9;--accent:#0b5cd5;--track:#e6e9ee}
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;background:var(--bg);color:var(--text)}
.top{background:#14171f;color:#fff}
.top div{max-width:980px;margin:0 auto;padding:14px 16px;display:flex;flex-wrap:wrap;gap:4px 16px;justify-content:space-between;align-items:baseline}
.top strong{font-size:1.0625rem}.top span{color:#c9cfda;font-size:.9375rem}
main{max-width:980px;margin:0 auto;padding:16px}
h1{font-size:1.5rem;line-height:1.25;margin:4px 0 16px}
h2{font-size:1.125rem;margin:0 0 12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:18px 20px;margin:0 0 16px}
.muted{color:var(--muted)}
.grid{display:grid;gap:12px;grid-template-columns:repeat(auto-fill,minmax(210px,1fr))}
.facts{display:grid;gap:12px 24px;grid-template-columns:repeat(auto-fill,minmax(180px,1fr));margin:0}
.facts dt{color:var(--muted);font-size:.8125rem;text-transform:uppercase;letter-spacing:.04em}
.facts dd{margin:2px 0 0;font-weight:600;overflow-wrap:anywhere}
.tile{border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.tile h3{font-size:.9375rem;margin:0}
.id{color:var(--muted);font-size:.8125rem;overflow-wrap:anywhere}
.suffix{color:var(--muted);font-size:.875rem;font-weight:400}
.plan-name{font-size:1.375rem;font-weight:650;margin:0 0 12px}
.flush{margin:0}.quote{margin:12px 0 0}.email{color:var(--muted);font-weight:400}
.tile .kind{color:var(--muted);font-size:.8125rem}
.tile .big{font-size:1.375rem;font-weight:650;margin:6px 0 2px;font-variant-numeric:tabular-nums}
.track{height:8px;background:var(--track);border-radius:4px;overflow:hidden;margin:8px 0 4px}
.track span{display:block;height:100%;background:var(--accent);border-radius:4px}
.track.over span{background:#b3261e}
.negative{color:#b3261e}
table{width:100%;border-collapse:collapse;font-size:.9375rem}
th,td{padding:9px 8px;text-align:left;border-bottom:1px solid var(--line);vertical-align:top}
thead th{font-weight:600;color:var(--muted);font-size:.8125rem;text-transform:uppercase;letter-spacing:.04em}
tbody th{font-weight:500}
.when{white-space:nowrap}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tfoot th,tfoot td{border-bottom:none;padding-top:6px;padding-bottom:6px}
tfoot .total th,tfoot .total td{font-size:1.0625rem;font-weight:700;border-top:2px solid var(--text)}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
.badge{display:inline-block;padding:1px 10px;border-radius:999px;font-size:.8125rem;font-weight:650;letter-spacing:.02em;vertical-align:middle}
.badge.DRAFT{background:#eef0f3;color:#3a404a;border:1px dashed #8a919e}.badge.OPEN{background:#fdf0c4;color:#6d4a00}.badge.PAID{background:#d4f5e2;color:#0b5132}.badge.VOID{background:#e6e8ec;color:#3a404a}
.badge.ACTIVE{background:#d4f5e2;color:#0b5132}.badge.SCHEDULED{background:#dbe8ff;color:#123d84}
.badge.OVERDUE{background:#fde2e0;color:#8c1d18}.badge.CORRECTION{background:#ebe6fa;color:#3e2a84}
.note{color:var(--muted);font-size:.875rem;font-weight:400;margin:2px 0 0}
.owed{font-size:1.75rem;font-weight:700;margin:0 0 4px;font-variant-numeric:tabular-nums}
.upcoming{margin:12px 0 0;padding:0;list-style:none}.nowrap{white-space:nowrap}.upcoming li{padding:10px 0;border-top:1px solid var(--line)}.upcoming li:first-child{border-top:none;padding-top:0}
.upcoming .head{display:flex;flex-wrap:wrap;justify-content:space-between;gap:4px 12px;font-weight:600}
.held{color:#6d4a00;font-size:.875rem;margin-top:2px}
.contact{font-weight:400;font-style:normal;color:var(--muted)}
.corrected{color:var(--muted);font-size:.8125rem}
.phone{display:none}
.chart svg.narrow{display:none}
a{color:#0a4fb8}a:focus-visible{outline:3px solid #0a4fb8;outline-offset:2px}
.chart{margin:0}.chart svg{display:block;width:100%;height:auto}
.chart .grid{stroke:var(--line)}.chart .axis{stroke:#8a919e}
.chart .tick{font-size:12px;fill:var(--muted)}.chart .axis-title{font-size:12px;fill:var(--muted);font-weight:600}
.chart figcaption{color:var(--muted);font-size:.875rem;margin-top:6px}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;font-size:.875rem;margin-bottom:8px}
.legend i{display:inline-block;width:12px;height:12px;border-radius:3px;margin-right:6px;vertical-align:-1px}
details{margin-top:8px}summary{cursor:pointer;color:#0a4fb8}
.ranges{display:flex;flex-wrap:wrap;gap:6px 8px;margin:0 0 12px}
.ranges a{display:inline-block;padding:3px 12px;border:1px solid var(--line);border-radius:999px;font-size:.875rem;text-decoration:none;white-space:nowrap}
.ranges a[aria-current]{background:#0a4fb8;border-color:#0a4fb8;color:#fff;font-weight:600}
.pay{border-left:4px solid #e0a800}
.instructions{white-space:pre-wrap;overflow-wrap:anywhere;background:#fafbfc;border:1px solid var(--line);border-radius:8px;padding:12px 14px;margin:8px 0 0;font:inherit}
.due{font-size:1.75rem;font-weight:700;margin:0;font-variant-numeric:tabular-nums}
footer{max-width:980px;margin:0 auto;padding:0 16px 32px;color:var(--muted);font-size:.875rem}
.refused{max-width:560px;margin:10vh auto;text-align:center}
@media (max-width:640px){
  main{padding:10px}.card{padding:14px 14px;border-radius:10px}h1{font-size:1.3rem}
  .wide{display:none}.phone{display:block}
  .when{white-space:normal;min-width:5.5em}
  .chart svg.wide{display:none}.chart svg.narrow{display:block}
  th,td{padding:8px 6px}
}
@media print{.top{background:none;color:#000}.top span{color:#000}.card{border:none}details{display:none}}
`

/**
 * Rewrites each <time> in the browser's time zone, naming the zone on every
 * time of day ("Dec 18, 3:04 PM GMT+9"; a date alone is a day); without the
 * script the UTC text stays, which says "UTC".
 */
const localTimes = `document.querySelectorAll("time[datetime]").forEach(function(t){var d=new Date(t.getAttribute("datetime"));if(isNaN(d))return;var s=t.dataset.style,o={month:"short",day:"numeric"};if(s!=="short")o.year="numeric";if(s!=="date"){o.hour="numeric";o.minute="2-digit";o.timeZoneName="short"}try{t.title=t.textContent;t.textContent=new Intl.DateTimeFormat(undefined,o).format(d)}catch(e){}});`

/** The Content-Security-Policy of every page: our inline style and this one script, nothing else. */
export const contentSecurityPolicy = `default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-${
  createHash("sha256").update(localTimes).digest("base64")
}'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`

const layout = (options: { readonly title: string; readonly lang: string; readonly top: Html; readonly body: Html }) =>
  html`<!doctype html>
<html lang="${options.lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${options.title}</title>
<style>${trusted(stylesheet)}</style>
</head>
<body>
<header class="top"><div>${options.top}</div></header>
${options.body}
<script>${trusted(localTimes)}</script>
</body>
</html>`

const topBar = (view: { readonly organizationName: string; readonly customerName: string }, what: string) =>
  html`<strong>${view.organizationName}</strong><span>${what} \u00b7 ${view.customerName}</span>`

const kindLabels: Record<Allowance["kind"], string> = {
  CREDIT: "Credits",
  OUTCOME: "Outcomes",
  UNIT: "Units",
  COMPOSITE: "Composite"
}

const allowanceTile = (allowance: Allowance, formats: Formats, held?: HeldAmount) => {
  const heading = html`<h3>${allowance.name}</h3><div class="kind">${kindLabels[allowance.kind]}</div>`
  const heldLine = heldNote(held, (h) => formats.quantity(h.amount))
  if (!BigDecimal.isPositive(allowance.granted)) {
    // Pay-as-you-go (ARREAR): nothing granted, use is billed after the cycle.
    return html`<div class="tile">${heading}<p class="big">${formats.quantity(allowance.used)}</p><div class="muted">used this cycle \u00b7 billed after it</div>${heldLine}</div>`
  }
  const share = toNumber(BigDecimal.unsafeDivide(BigDecimal.multiply(allowance.used, HUNDRED), allowance.granted))
  const over = BigDecimal.isNegative(allowance.remaining)
  return html`<div class="tile">${heading}
<p class="big${over ? " negative" : ""}">${formats.quantity(allowance.remaining)} <span class="suffix">left</span></p>
<div class="track${over ? " over" : ""}" role="img" aria-label="${formats.quantity(allowance.used)} used of ${formats.quantity(allowance.granted)}"><span style="width:${Math.min(100, Math.max(0, share)).toFixed(1)}%"></span></div>
<div class="muted">${formats.quantity(allowance.used)} used of ${formats.quantity(allowance.granted)}</div>${heldLine}</div>`
}

const statusLabel = (status: string) => (status === "DRAFT" ? "Draft" : status)

const statusBadge = (status: string) => html`<span class="badge ${status}">${statusLabel(status)}</span>`

/** OPEN and overdue: both badges, so the state reads in words and not by colour alone. */
const invoiceBadges = (invoice: Pick<Invoice, "status" | "overdue">) =>
  html`${statusBadge(invoice.status)}${invoice.status === "OPEN" && invoice.overdue ? html` <span class="badge OVERDUE">Overdue</span>` : ""}`

const period = (start: Date | null, end: Date | null, formats: Formats) =>
  start === null || end === null ? html`<span class="muted">n/a</span>` : html`${formats.date(start)} \u2013 ${formats.date(end)}`

const usageName = (row: PortalPageView["latestUsage"][number]) =>
  row.entitlementName ?? row.compositeRef ?? row.agentKey ?? meterLabels[row.meter] ?? row.meter

/** "0.2 Assistant credits" or "$1.50 of the wallet": an amount held, in its balance's unit. */
const heldText = (held: HeldAmount, currency: string, formats: Formats) =>
  held.meter === "WALLET"
    ? `${formats.money(held.amount, currency)} of the wallet`
    : `${formats.quantity(held.amount)} ${held.name}`

/** "a, b and c" */
const listed = (items: ReadonlyArray<string>) =>
  items.length <= 1 ? items.join("") : `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`

/** Under a tile: what active holds keep back of it. */
const heldNote = (held: HeldAmount | undefined, text: (held: HeldAmount) => string) =>
  held === undefined ? "" : html`<div class="held" data-testid="tile-held">${text(held)} held</div>`

/**
 * What the customer owes now: every OPEN invoice with what remains to pay of
 * it and its due date, the overdue ones marked, and their sum.
 */
const owedSection = (view: PortalPageView, formats: Formats) => {
  const { owed } = view
  const money = (value: BigDecimal.BigDecimal) => formats.money(value, view.currencyCode)
  if (owed.count === 0) {
    return html`<section class="card" aria-labelledby="owed"><h2 id="owed">What you owe</h2><p class="flush" data-testid="owed-none">Nothing: you have no open invoices.</p></section>`
  }
  const more = owed.count - owed.invoices.length
  return html`<section class="card pay" aria-labelledby="owed"><h2 id="owed">What you owe</h2>
<p class="owed" data-testid="owed-total">${money(owed.amountDue)}</p>
<p class="note">${owed.count === 1 ? "1 open invoice" : `${owed.count} open invoices`}${
    owed.overdue === 0 ? "" : html`, <strong class="negative" data-testid="owed-overdue">${owed.overdue} overdue</strong>`
  }${more > 0 ? `; the ${owed.invoices.length} oldest are listed, and the total counts those` : ""}. Open an invoice for how to pay it.</p>
<div class="scroll"><table data-testid="owed-invoices">
<thead><tr><th scope="col">Invoice</th><th scope="col">Due</th><th scope="col" class="num">Amount due</th></tr></thead>
<tbody>${
    owed.invoices.map(({ href, invoice }) =>
      html`<tr><td><a class="nowrap" href="${href}">${invoice.number ?? invoiceTitle(invoice)}</a><div class="id">${invoiceTitle(invoice)}</div></td><td>${
        invoice.dueDate === null ? html`<span class="muted">n/a</span>` : formats.date(invoice.dueDate)
      }${invoice.overdue ? html` <span class="badge OVERDUE">Overdue</span>` : ""}</td><td class="num">${
        formats.money(amountDueOf(invoice), invoice.currencyCode)
      }</td></tr>`
    )
  }</tbody></table></div></section>`
}

/** What an upcoming invoice will ask of the customer, in words. */
const upcomingOutcome = (invoice: UpcomingInvoice, formats: Formats) =>
  BigDecimal.isZero(invoice.total)
    ? "nothing to pay"
    : invoice.status === "PAID"
    ? "to be paid from your wallet (auto-payment)"
    : invoice.status === "DRAFT"
    ? "issued as a draft first (late usage may still change it), due once final"
    : invoice.dueDate === null
    ? "to be paid when issued"
    : html`due ${formats.date(invoice.dueDate)}`

/**
 * The upcoming invoices (`Purchases.upcoming`): what the cycle job would
 * issue at the end of this cycle if no more usage arrived, each with its
 * lines; never stored, so no number yet.
 */
const upcomingSection = (view: PortalPageView, formats: Formats) => {
  if (view.upcoming.length === 0) {
    return html`<section class="card" aria-labelledby="upcoming"><h2 id="upcoming">Upcoming invoice</h2><p class="muted flush">None: there is no current plan to bill.</p></section>`
  }
  const [first] = view.upcoming
  const total = sum(view.upcoming.map((invoice) => invoice.total))
  const money = (value: BigDecimal.BigDecimal, currency: string) => formats.money(value, currency)
  return html`<section class="card" aria-labelledby="upcoming"><h2 id="upcoming">Upcoming invoice${view.upcoming.length === 1 ? "" : "s"}</h2>
<p class="flush" data-testid="upcoming-summary">On ${formats.dateTime(first!.issuedAt)}, ${money(total, first!.currencyCode)} in all${
    view.upcoming.length === 1 ? "" : ` over ${view.upcoming.length} invoices`
  }, if no more usage arrives before then.</p>
<p class="note">A preview: usage from now on adds to it, and it is issued, with a number, when the cycle ends.</p>
<ul class="upcoming">${
    view.upcoming.map((invoice) =>
      html`<li data-testid="upcoming-invoice"><div class="head"><span>${invoiceTitle(invoice)} <span class="muted">${
        period(invoice.periodStart, invoice.periodEnd, formats)
      }</span></span><span class="num">${money(invoice.total, invoice.currencyCode)}</span></div>
<div class="note">${upcomingOutcome(invoice, formats)}</div>
<details><summary>Lines</summary><div class="scroll"><table>
<thead><tr><th scope="col">Description</th><th scope="col" class="num">Amount</th></tr></thead>
<tbody>${
        invoice.lines.map((line) =>
          html`<tr><td>${line.description}</td><td class="num">${formats.preciseMoney(line.amount, invoice.currencyCode)}</td></tr>`
        )
      }${
        invoice.taxLines.map((tax) =>
          html`<tr><td>${tax.name} (${formats.quantity(tax.ratePercent)}%)</td><td class="num">${money(tax.amount, invoice.currencyCode)}</td></tr>`
        )
      }</tbody></table></div></details></li>`
    )
  }</ul></section>`
}

/**
 * What the chart's "in all" is made of beside the plan's "usage charges":
 * the chart counts every use at the customer's prices, the charges only what
 * is billed after the cycle or taken from the wallet; the rest was drawn from
 * allowances the plan price prepaid. The charges count usage when it was
 * priced, the chart when it happened, so the two can differ the other way
 * (usage priced this cycle that happened before it); then it says that.
 */
const usageExplained = (view: PortalPageView, formats: Formats) => {
  if (view.plan === null || view.usage.range.kind !== "cycle") return ""
  const money = (value: BigDecimal.BigDecimal) => formats.money(value, view.currencyCode)
  const total = sum(view.usage.points.map((row) => row.customerCost))
  if (!BigDecimal.isPositive(total)) return ""
  const charged = view.plan.spentThisCycle
  const prepaid = BigDecimal.subtract(total, charged)
  const text = BigDecimal.isZero(prepaid)
    ? html`${money(total)} in all, every cent of it charged (billed after the cycle, or taken from the wallet as it was used): the plan's usage charges.`
    : BigDecimal.isPositive(prepaid)
    ? html`${money(total)} in all: ${money(charged)} of it is charged (billed after the cycle, or taken from the wallet as it was used), the plan's usage charges above; the other ${
      money(prepaid)
    } was drawn from allowances the plan price already paid for, and is not charged again.`
    : html`${money(total)} in all. The plan's usage charges (${
      money(charged)
    }) count usage when it was priced, the chart when it happened: they include usage priced this cycle that happened before it.`
  return html`<p class="note" data-testid="usage-explained">${text}</p>`
}

/** An ended cycle's period, short: "Nov 3 – Dec 3". */
const shortPeriod = (period: { readonly start: Date; readonly end: Date }, formats: Formats) =>
  `${formats.shortDay(period.start.toISOString().slice(0, 10))} \u2013 ${formats.shortDay(period.end.toISOString().slice(0, 10))}`

const usageHeading = (view: PortalPageView, formats: Formats) => {
  const { range } = view.usage
  if (range.kind === "months") return "Usage, last 12 months"
  if (range.kind === "previous") return `Usage, ${range.back === 1 ? "previous cycle" : "an earlier cycle"} (${shortPeriod({ start: view.usage.from, end: view.usage.to }, formats)})`
  return view.plan === null ? "Usage, last 30 days" : "Usage this cycle"
}

/**
 * The chart's ranges as links, the one shown marked: this cycle, each of the
 * latest ended cycles by its dates, the last 12 months. Plain links to this
 * page (the token and `usage=`): no script, no form.
 */
const usageRanges = (view: PortalPageView, formats: Formats) =>
  html`<nav class="ranges" aria-label="Usage shown" data-testid="usage-ranges">${
    view.usage.choices.map((choice) => {
      const label = choice.range.kind === "months"
        ? "Last 12 months"
        : choice.range.kind === "previous" && choice.period !== undefined
        ? shortPeriod(choice.period, formats)
        : view.plan === null ? "Last 30 days" : "This cycle"
      return choice.current
        ? html`<a href="${choice.href}" aria-current="page">${label}</a>`
        : html`<a href="${choice.href}">${label}</a>`
    })
  }</nav>`

/** A usage row, a correction labelled as one (a reversing row's costs are negative: it takes back an earlier row). */
const usageRow = (row: PortalPageView["latestUsage"][number], correctedIds: ReadonlySet<string>, currency: string, formats: Formats) => {
  const correction = row.reverses !== null
  return html`<tr${correction ? html` class="correction" data-testid="correction"` : ""}><td class="when">${formats.shortDateTime(row.createdAt)}</td><td>${
    correction ? html`<span class="badge CORRECTION">Correction</span> ` : ""
  }${usageName(row)}${row.model === null ? "" : html`<div class="muted">${row.model}</div>`}${
    correction
      ? html`<div class="corrected">Takes back an earlier use: what that use drew or was charged is given back.</div>`
      : correctedIds.has(row.id)
      ? html`<div class="corrected">Taken back by a correction.</div>`
      : ""
  }</td><td class="wide">${meterLabels[row.meter] ?? row.meter}</td><td class="num wide">${formats.quantity(row.quantity)}</td><td class="num">${formats.preciseMoney(row.customerCost, currency)}</td></tr>`
}

export const portalPage = (view: PortalPageView, formats: Formats): Html => {
  const currency = view.currencyCode
  const money = (value: BigDecimal.BigDecimal) => formats.money(value, currency)
  const plan = view.plan === null
    ? html`<section class="card" aria-labelledby="plan"><h2 id="plan">Plan</h2><p class="muted">No current plan.</p></section>`
    : html`<section class="card" aria-labelledby="plan">
<h2 id="plan">Plan</h2>
<p class="plan-name">${view.plan.name} ${statusBadge(view.plan.status)}</p>
<dl class="facts">
<div><dt>Current cycle</dt><dd>${period(view.plan.periodStart, view.plan.periodEnd, formats)}</dd></div>
<div><dt>Plan price</dt><dd>${money(view.plan.cost)} <span class="muted">/ ${view.plan.billingCycle.toLowerCase()}</span></dd></div>
<div><dt>Usage charges this cycle</dt><dd>${money(view.plan.spentThisCycle)}<p class="note">Billed after the cycle, or taken from the wallet as used</p></dd></div>
</dl>
</section>`
  const heldOf = (meter: string, name: string) => view.held.find((held) => held.meter === meter && (meter === "WALLET" || held.name === name))
  const wallet = html`<div class="tile"><h3>Wallet</h3><div class="kind">Prepaid money</div>
<p class="big${isNegativeInCents(view.wallet.balance) ? " negative" : ""}">${money(view.wallet.balance)}</p>
${view.wallet.reservedBalance === null ? "" : html`<div class="muted">Reserved: ${money(view.wallet.reservedBalance)}</div>`}${
    heldNote(heldOf("WALLET", "Wallet"), (held) => money(held.amount))
  }</div>`
  const holds = view.held.length === 0
    ? ""
    : html`<p class="note" data-testid="holds">Held for requests in progress: <strong>${
      listed(view.held.map((held) => heldText(held, currency, formats)))
    }</strong>. A hold is settled when its request is billed, or released unused; the last of these ends by ${
      formats.dateTime(new Date(Math.max(...view.held.map((held) => held.until.getTime()))))
    } at the latest. The balances above still include what is held: it comes off them only when its request is billed.</p>`
  const correctedIds = new Set(view.latestUsage.flatMap((row) => (row.reverses === null ? [] : [row.reverses])))
  const usageRows = view.latestUsage.length === 0
    ? html`<p class="muted">No usage yet.</p>`
    : html`<div class="scroll"><table>
<thead><tr><th scope="col">Time</th><th scope="col">What</th><th scope="col" class="wide">Meter</th><th scope="col" class="num wide">Quantity</th><th scope="col" class="num">Cost</th></tr></thead>
<tbody>${view.latestUsage.map((row) => usageRow(row, correctedIds, currency, formats))}</tbody></table></div>`
  const invoices = view.invoices.length === 0
    ? html`<p class="muted">No invoices yet.</p>`
    : html`<div class="scroll"><table>
<thead><tr><th scope="col">Invoice</th><th scope="col" class="wide">Issued</th><th scope="col" class="wide">Period</th><th scope="col" class="wide">Due</th><th scope="col">Status</th><th scope="col" class="num">Total</th></tr></thead>
<tbody>${
      view.invoices.map(({ href, invoice }) =>
        html`<tr><td><a href="${href}">${invoiceTitle(invoice)}</a><div class="id">${invoice.number ?? "Draft"}</div></td><td class="wide">${
          formats.date(invoice.issuedAt)
        }</td><td class="wide">${period(invoice.periodStart, invoice.periodEnd, formats)}</td><td class="wide">${
          invoice.dueDate === null ? html`<span class="muted">n/a</span>` : formats.date(invoice.dueDate)
        }</td><td>${invoiceBadges(invoice)}</td><td class="num">${
          formats.money(invoice.total, invoice.currencyCode)
        }${creditNotesUnderTotal(invoice, formats)}</td></tr>`
      )
    }</tbody></table></div>`

  return layout({
    title: `${view.organizationName}: billing for ${view.customerName}`,
    lang: formats.locale,
    top: topBar(view, "Billing"),
    body: html`<main>
<h1>Billing for ${view.customerName}</h1>
${owedSection(view, formats)}
${plan}
${upcomingSection(view, formats)}
<section class="card" aria-labelledby="balances"><h2 id="balances">Balances</h2><div class="grid">${wallet}${
      view.allowances.map((allowance) =>
        allowanceTile(allowance, formats, heldOf(allowance.kind, allowance.name))
      )
    }</div>${holds}</section>
<section class="card" aria-labelledby="usage"><h2 id="usage">${usageHeading(view, formats)}</h2>${usageRanges(view, formats)}${
      usageChart(view.usage.periods, view.usage.points, currency, formats, view.usage.granularity)
    }${usageExplained(view, formats)}</section>
<section class="card" aria-labelledby="latest"><h2 id="latest">Latest usage</h2>${usageRows}</section>
<section class="card" aria-labelledby="invoices"><h2 id="invoices">Invoices</h2>${invoices}</section>
</main>
<footer>This page is read-only. Its link works until ${formats.dateTime(view.expiresAt)}; ask ${view.organizationName} for a new one after that.</footer>`
  })
}

/** Under an invoice's total in the portal's list: each credit note against it, and what it left due. */
const creditNotesUnderTotal = (invoice: Invoice, formats: Formats) =>
  invoice.creditNotes.length === 0 ? "" : html`${
    invoice.creditNotes.map((note) =>
      html`<div class="note" data-testid="credit-note">${note.number} ${formats.money(BigDecimal.negate(note.amount), invoice.currencyCode)}${
        note.appliedTo === "WALLET" ? " to wallet" : ""
      }</div>`
    )
  }${invoice.status === "OPEN" ? html`<div class="note">${formats.money(invoice.amountDue, invoice.currencyCode)} due</div>` : ""}`

/** Where a credit note's amount went, in words. */
const appliedText = (note: Invoice["creditNotes"][number]) =>
  note.appliedTo === "WALLET" ? "Credited to your wallet" : "Taken off the amount due"

/**
 * The hosted page's credit notes: each with its number, date, amount, where
 * it went and why.
 */
const creditNotesSection = (invoice: Invoice, formats: Formats) =>
  invoice.creditNotes.length === 0 ? "" : html`<section class="card" aria-labelledby="credit-notes"><h2 id="credit-notes">Credit notes</h2><div class="scroll"><table data-testid="credit-notes">
<thead><tr><th scope="col">Credit note</th><th scope="col" class="wide">Date</th><th scope="col">Reason</th><th scope="col" class="num">Amount</th></tr></thead>
<tbody>${
    invoice.creditNotes.map((note) =>
      html`<tr><td class="nowrap">${note.number}<div class="phone muted">${formats.date(note.createdAt)}</div></td><td class="wide">${
        formats.date(note.createdAt)
      }</td><td>${note.reason}<div class="note">${appliedText(note)}</div></td><td class="num">${
        formats.money(note.amount, invoice.currencyCode)
      }</td></tr>`
    )
  }</tbody></table></div></section>`

/** A line's own period, shown when it is not the invoice's (a late line of an earlier cycle). */
const linePeriod = (invoice: Invoice, line: Invoice["lines"][number], formats: Formats) =>
  line.periodStart === null || line.periodEnd === null ||
    (line.periodStart.getTime() === invoice.periodStart?.getTime() && line.periodEnd.getTime() === invoice.periodEnd?.getTime())
    ? ""
    : html`<div class="muted" data-testid="line-period">Period ${period(line.periodStart, line.periodEnd, formats)}</div>`

const invoiceTitle = (invoice: Pick<Invoice, "kind">) =>
  `${invoice.kind === "PLAN" ? "Plan" : invoice.kind === "PRORATION" ? "Plan change" : "Usage"} invoice`

/** The organisation's billing contact: its name, and the e-mail address and postal address when it set them. */
const contactOf = (view: InvoicePageView) =>
  html`<address class="contact" data-testid="billing-contact">${
    view.contact.email === null ? "" : html`<a href="mailto:${view.contact.email}">${view.contact.email}</a>`
  }${view.contact.addressLines.map((line, index) => html`${index === 0 && view.contact.email === null ? "" : html`<br>`}${line}`)}</address>`

const hasContact = (view: InvoicePageView) => view.contact.email !== null || view.contact.addressLines.length > 0

/** A line's unit price: the one it carries or its unit's (FLAT, VOLUME), "tiered" for a graduated unit, else nothing. */
const unitPriceText = (shown: UnitPriceShown | undefined, currency: string, formats: Formats) =>
  shown === undefined || shown._tag === "None"
    ? null
    : shown._tag === "Tiered"
    ? "tiered"
    : formats.preciseMoney(shown.price, currency)

/**
 * The hosted invoice page. `links.pdf` is the address of the invoice's PDF,
 * opened by the page's own token (src/links/InvoiceLinks.ts `invoicePdfHrefOnPage`).
 */
export const invoicePage = (view: InvoicePageView, formats: Formats, links: { readonly pdf?: string } = {}): Html => {
  const { invoice } = view
  const money = (value: BigDecimal.BigDecimal) => formats.money(value, invoice.currencyCode)
  const precise = (value: BigDecimal.BigDecimal | null) =>
    value === null ? "" : formats.preciseMoney(value, invoice.currencyCode)
  // What the customer quotes: the number (an OPEN invoice always has one), the id only were it missing.
  const reference = invoice.number ?? invoice.id
  const overdue = invoice.status === "OPEN" && invoice.overdue
  // The credit notes that lowered what the invoice asks, and what they left of its total.
  const lowering = invoice.creditNotes.filter((note) => note.appliedTo === "AMOUNT_DUE")
  const afterNotes = lowering.reduce((left, note) => BigDecimal.subtract(left, note.amount), invoice.total)
  const settledByNotes = lowering.length > 0 && !BigDecimal.isPositive(afterNotes)
  const howToPay = invoice.status === "OPEN"
    ? html`<section class="card pay" aria-labelledby="pay"><h2 id="pay">How to pay</h2>
<p class="muted flush">Amount due</p><p class="due" data-testid="amount-due">${money(amountDueOf(invoice))}</p>
${
      invoice.dueDate === null
        ? ""
        : html`<p class="flush${overdue ? " negative" : ""}" data-testid="due-date">${overdue ? "Overdue: it was due" : "Due"} ${
          formats.date(invoice.dueDate)
        }.</p>`
    }${
      view.paymentInstructions === null
        ? html`<p>Contact ${view.organizationName}${
          view.contact.email === null ? "" : html` at <a href="mailto:${view.contact.email}">${view.contact.email}</a>`
        } to pay this invoice, quoting <strong data-testid="quote-number">${reference}</strong>.</p>`
        : html`<p class="quote">Please quote <strong data-testid="quote-number">${reference}</strong> with your payment.</p><div class="instructions" data-testid="payment-instructions">${view.paymentInstructions}</div>`
    }</section>`
    : invoice.status === "DRAFT"
    ? html`<section class="card" aria-labelledby="pay" data-testid="invoice-draft"><h2 id="pay">Draft</h2><p>This invoice is a draft: usage of its period that arrives late may still change it. It cannot be paid yet; ${view.organizationName} will issue it when it is final.</p></section>`
    : invoice.status === "PAID"
    ? html`<section class="card" aria-labelledby="pay"><h2 id="pay">Paid</h2><p>${settledByNotes ? "Settled by credit notes" : "Paid in full"}${
      invoice.paidAt === null ? "" : html` on ${formats.dateTime(invoice.paidAt)}`
    }. Nothing is due.</p></section>`
    : html`<section class="card" aria-labelledby="pay"><h2 id="pay">Void</h2><p>This invoice was voided${
      invoice.voidedAt === null ? "" : html` on ${formats.dateTime(invoice.voidedAt)}`
    }. Nothing is due.</p></section>`

  return layout({
    title: `${invoiceTitle(invoice)} ${invoice.number ?? "(draft)"} from ${view.organizationName}`,
    lang: formats.locale,
    top: topBar(view, "Invoice"),
    body: html`<main>
<h1>${invoiceTitle(invoice)} ${invoiceBadges(invoice)}</h1>
<section class="card" aria-label="Invoice details"><dl class="facts">
<div><dt>Invoice number</dt><dd data-testid="invoice-number">${invoice.number ?? html`<span class="muted">Given when final</span>`}</dd></div>
<div><dt>From</dt><dd>${view.organizationName}${hasContact(view) ? contactOf(view) : ""}</dd></div>
<div><dt>Billed to</dt><dd>${view.customerName}<div class="email">${view.customerEmail}</div></dd></div>
<div><dt>Issued</dt><dd>${formats.date(invoice.issuedAt)}</dd></div>
<div><dt>Period</dt><dd>${period(invoice.periodStart, invoice.periodEnd, formats)}</dd></div>
<div><dt>Due</dt><dd>${
      invoice.dueDate === null ? html`<span class="muted">When final</span>` : formats.date(invoice.dueDate)
    }</dd></div>
<div><dt>Total</dt><dd>${money(invoice.total)}</dd></div>
</dl>${
      links.pdf === undefined ? "" : html`<p class="quote"><a href="${links.pdf}" download data-testid="invoice-pdf">Download PDF</a></p>`
    }</section>
${howToPay}
<section class="card" aria-labelledby="lines"><h2 id="lines">Lines</h2><div class="scroll"><table>
<thead><tr><th scope="col">Description</th><th scope="col" class="num wide">Quantity</th><th scope="col" class="num wide">Unit price</th><th scope="col" class="num">Amount</th></tr></thead>
<tbody>${
      invoice.lines.map((line, index) => {
        const unitPrice = unitPriceText(view.unitPrices[index], invoice.currencyCode, formats)
        const quantity = line.quantity === null ? null : formats.quantity(line.quantity)
        // On a phone the two columns are hidden: the line says them under its description instead.
        const onPhone = quantity === null
          ? ""
          : html`<div class="phone muted" data-testid="line-quantity">${quantity}${unitPrice === null ? "" : ` \u00d7 ${unitPrice}`}</div>`
        return html`<tr><td>${line.description}${linePeriod(invoice, line, formats)}${onPhone}</td><td class="num wide">${
          quantity ?? ""
        }</td><td class="num wide" data-testid="unit-price">${unitPrice ?? ""}</td><td class="num">${precise(line.amount)}</td></tr>`
      })
    }</tbody>
<tfoot>
<tr><td class="wide" colspan="2"></td><th scope="row" class="num">Subtotal</th><td class="num">${money(invoice.subtotal)}</td></tr>
${
      invoice.taxLines.map((tax) =>
        html`<tr><td class="wide" colspan="2"></td><th scope="row" class="num">${tax.name} (${formats.quantity(tax.ratePercent)}%)</th><td class="num">${
          money(tax.amount)
        }</td></tr>`
      )
    }
<tr class="total"><td class="wide" colspan="2"></td><th scope="row" class="num">Total</th><td class="num" data-testid="invoice-total">${money(invoice.total)}</td></tr>
${
      lowering.map((note) =>
        html`<tr><td class="wide" colspan="2"></td><th scope="row" class="num">Credit note ${note.number}</th><td class="num">${
          money(BigDecimal.negate(note.amount))
        }</td></tr>`
      )
    }${
      lowering.length === 0
        ? ""
        : html`<tr class="total"><td class="wide" colspan="2"></td><th scope="row" class="num">${
          invoice.status === "OPEN" ? "Amount due" : "After credit notes"
        }</th><td class="num" data-testid="after-credit-notes">${money(invoice.status === "OPEN" ? invoice.amountDue : afterNotes)}</td></tr>`
    }
</tfoot></table></div></section>
${creditNotesSection(invoice, formats)}
</main>`
  })
}

const refusals: Record<PageRefusal | "Failed", { readonly status: number; readonly title: string; readonly text: string }> = {
  Invalid: {
    status: 401,
    title: "This link is not valid",
    text: "It may have been copied incompletely or changed. Ask the company that bills you for a new link."
  },
  Expired: {
    status: 401,
    title: "This link has expired",
    text: "Links to these pages work for a limited time. Ask the company that bills you for a new link."
  },
  NotFound: { status: 404, title: "Not found", text: "There is nothing at this address." },
  Failed: { status: 500, title: "Something went wrong", text: "Please try again in a moment." }
}

export const refusalStatus = (refusal: PageRefusal | "Failed") => refusals[refusal].status

export const refusalPage = (refusal: PageRefusal | "Failed", lang: string): Html => {
  const { text, title } = refusals[refusal]
  return layout({
    title,
    lang,
    top: html`<strong>Billing</strong>`,
    body: html`<main class="refused"><h1>${title}</h1><p class="muted">${text}</p></main>`
  })
}
