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
import { HUNDRED, toNumber } from "../money.ts"
import { meterLabels, usageChart } from "./Chart.ts"
import { type Formats, isNegativeInCents } from "./Format.ts"
import { type Html, html, trusted } from "./Html.ts"
import type { InvoicePageView, PageRefusal, PortalPageView } from "./PortalView.ts"

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
a{color:#0a4fb8}a:focus-visible{outline:3px solid #0a4fb8;outline-offset:2px}
.chart{margin:0}.chart svg{display:block;width:100%;height:auto}
.chart .grid{stroke:var(--line)}.chart .axis{stroke:#8a919e}
.chart .tick{font-size:12px;fill:var(--muted)}.chart .axis-title{font-size:12px;fill:var(--muted);font-weight:600}
.chart figcaption{color:var(--muted);font-size:.875rem;margin-top:6px}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;font-size:.875rem;margin-bottom:8px}
.legend i{display:inline-block;width:12px;height:12px;border-radius:3px;margin-right:6px;vertical-align:-1px}
details{margin-top:8px}summary{cursor:pointer;color:#0a4fb8}
.pay{border-left:4px solid #e0a800}
.instructions{white-space:pre-wrap;overflow-wrap:anywhere;background:#fafbfc;border:1px solid var(--line);border-radius:8px;padding:12px 14px;margin:8px 0 0;font:inherit}
.due{font-size:1.75rem;font-weight:700;margin:0;font-variant-numeric:tabular-nums}
footer{max-width:980px;margin:0 auto;padding:0 16px 32px;color:var(--muted);font-size:.875rem}
.refused{max-width:560px;margin:10vh auto;text-align:center}
@media (max-width:640px){
  main{padding:10px}.card{padding:14px 14px;border-radius:10px}h1{font-size:1.3rem}
  .wide{display:none}
  .chart .tick,.chart .axis-title{font-size:19px}
  th,td{padding:8px 6px}
}
@media print{.top{background:none;color:#000}.top span{color:#000}.card{border:none}details{display:none}}
`

/** Rewrites each <time> in the browser's time zone; without the script the UTC text stays. */
const localTimes = `document.querySelectorAll("time[datetime]").forEach(function(t){var d=new Date(t.getAttribute("datetime"));if(isNaN(d))return;var s=t.dataset.style,o={month:"short",day:"numeric"};if(s!=="short")o.year="numeric";if(s!=="date"){o.hour="numeric";o.minute="2-digit"}if(s==="datetime")o.timeZoneName="short";try{t.title=t.textContent;t.textContent=new Intl.DateTimeFormat(undefined,o).format(d)}catch(e){}});`

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

const allowanceTile = (allowance: Allowance, formats: Formats) => {
  const heading = html`<h3>${allowance.name}</h3><div class="kind">${kindLabels[allowance.kind]}</div>`
  if (!BigDecimal.isPositive(allowance.granted)) {
    // Pay-as-you-go (ARREAR): nothing granted, use is billed after the cycle.
    return html`<div class="tile">${heading}<p class="big">${formats.quantity(allowance.used)}</p><div class="muted">used this cycle \u00b7 billed after it</div></div>`
  }
  const share = toNumber(BigDecimal.unsafeDivide(BigDecimal.multiply(allowance.used, HUNDRED), allowance.granted))
  const over = BigDecimal.isNegative(allowance.remaining)
  return html`<div class="tile">${heading}
<p class="big${over ? " negative" : ""}">${formats.quantity(allowance.remaining)} <span class="suffix">left</span></p>
<div class="track${over ? " over" : ""}" role="img" aria-label="${formats.quantity(allowance.used)} used of ${formats.quantity(allowance.granted)}"><span style="width:${Math.min(100, Math.max(0, share)).toFixed(1)}%"></span></div>
<div class="muted">${formats.quantity(allowance.used)} used of ${formats.quantity(allowance.granted)}</div></div>`
}

const statusLabel = (status: string) => (status === "DRAFT" ? "Draft" : status)

const statusBadge = (status: string) => html`<span class="badge ${status}">${statusLabel(status)}</span>`

const period = (start: Date | null, end: Date | null, formats: Formats) =>
  start === null || end === null ? html`<span class="muted">n/a</span>` : html`${formats.date(start)} \u2013 ${formats.date(end)}`

const usageName = (row: PortalPageView["latestUsage"][number]) =>
  row.entitlementName ?? row.compositeRef ?? row.agentKey ?? meterLabels[row.meter] ?? row.meter

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
<div><dt>Usage charges this cycle</dt><dd>${money(view.plan.spentThisCycle)}</dd></div>
</dl>
</section>`
  const wallet = html`<div class="tile"><h3>Wallet</h3><div class="kind">Prepaid money</div>
<p class="big${isNegativeInCents(view.wallet.balance) ? " negative" : ""}">${money(view.wallet.balance)}</p>
${view.wallet.reservedBalance === null ? "" : html`<div class="muted">Reserved: ${money(view.wallet.reservedBalance)}</div>`}</div>`
  const usageRows = view.latestUsage.length === 0
    ? html`<p class="muted">No usage yet.</p>`
    : html`<div class="scroll"><table>
<thead><tr><th scope="col">Time</th><th scope="col">What</th><th scope="col" class="wide">Meter</th><th scope="col" class="num wide">Quantity</th><th scope="col" class="num">Cost</th></tr></thead>
<tbody>${
      view.latestUsage.map((row) =>
        html`<tr><td class="when">${formats.shortDateTime(row.createdAt)}</td><td>${usageName(row)}${
          row.model === null ? "" : html`<div class="muted">${row.model}</div>`
        }</td><td class="wide">${meterLabels[row.meter] ?? row.meter}</td><td class="num wide">${formats.quantity(row.quantity)}</td><td class="num">${
          formats.preciseMoney(row.customerCost, currency)
        }</td></tr>`
      )
    }</tbody></table></div>`
  const invoices = view.invoices.length === 0
    ? html`<p class="muted">No invoices yet.</p>`
    : html`<div class="scroll"><table>
<thead><tr><th scope="col">Invoice</th><th scope="col" class="wide">Issued</th><th scope="col" class="wide">Period</th><th scope="col">Status</th><th scope="col" class="num">Total</th></tr></thead>
<tbody>${
      view.invoices.map(({ href, invoice }) =>
        html`<tr><td><a href="${href}">${invoiceTitle(invoice)}</a><div class="id">${invoice.number ?? "Draft"}</div></td><td class="wide">${
          formats.date(invoice.issuedAt)
        }</td><td class="wide">${period(invoice.periodStart, invoice.periodEnd, formats)}</td><td>${statusBadge(invoice.status)}</td><td class="num">${
          formats.money(invoice.total, invoice.currencyCode)
        }</td></tr>`
      )
    }</tbody></table></div>`

  return layout({
    title: `${view.organizationName}: billing for ${view.customerName}`,
    lang: formats.locale,
    top: topBar(view, "Billing"),
    body: html`<main>
<h1>Billing for ${view.customerName}</h1>
${plan}
<section class="card" aria-labelledby="balances"><h2 id="balances">Balances</h2><div class="grid">${wallet}${
      view.allowances.map((allowance) => allowanceTile(allowance, formats))
    }</div></section>
<section class="card" aria-labelledby="usage"><h2 id="usage">${view.plan === null ? "Usage, last 30 days" : "Usage this cycle"}</h2>${
      usageChart(view.usageDays, view.dailyUsage, currency, formats)
    }</section>
<section class="card" aria-labelledby="latest"><h2 id="latest">Latest usage</h2>${usageRows}</section>
<section class="card" aria-labelledby="invoices"><h2 id="invoices">Invoices</h2>${invoices}</section>
</main>
<footer>This page is read-only. Its link works until ${formats.dateTime(view.expiresAt)}; ask ${view.organizationName} for a new one after that.</footer>`
  })
}

/** A line's own period, shown when it is not the invoice's (a late line of an earlier cycle). */
const linePeriod = (invoice: Invoice, line: Invoice["lines"][number], formats: Formats) =>
  line.periodStart === null || line.periodEnd === null ||
    (line.periodStart.getTime() === invoice.periodStart?.getTime() && line.periodEnd.getTime() === invoice.periodEnd?.getTime())
    ? ""
    : html`<div class="muted" data-testid="line-period">Period ${period(line.periodStart, line.periodEnd, formats)}</div>`

const invoiceTitle = (invoice: Invoice) =>
  `${invoice.kind === "PLAN" ? "Plan" : invoice.kind === "PRORATION" ? "Plan change" : "Usage"} invoice`

export const invoicePage = (view: InvoicePageView, formats: Formats): Html => {
  const { invoice } = view
  const money = (value: BigDecimal.BigDecimal) => formats.money(value, invoice.currencyCode)
  const precise = (value: BigDecimal.BigDecimal | null) =>
    value === null ? "" : formats.preciseMoney(value, invoice.currencyCode)
  // What the customer quotes: the number (an OPEN invoice always has one), the id only were it missing.
  const reference = invoice.number ?? invoice.id
  const howToPay = invoice.status === "OPEN"
    ? html`<section class="card pay" aria-labelledby="pay"><h2 id="pay">How to pay</h2>
<p class="muted flush">Amount due</p><p class="due">${money(invoice.total)}</p>
${
      view.paymentInstructions === null
        ? html`<p>Contact ${view.organizationName} to pay this invoice, quoting <strong data-testid="quote-number">${reference}</strong>.</p>`
        : html`<p class="quote">Please quote <strong data-testid="quote-number">${reference}</strong> with your payment.</p><div class="instructions" data-testid="payment-instructions">${view.paymentInstructions}</div>`
    }</section>`
    : invoice.status === "DRAFT"
    ? html`<section class="card" aria-labelledby="pay" data-testid="invoice-draft"><h2 id="pay">Draft</h2><p>This invoice is a draft: usage of its period that arrives late may still change it. It cannot be paid yet; ${view.organizationName} will issue it when it is final.</p></section>`
    : invoice.status === "PAID"
    ? html`<section class="card" aria-labelledby="pay"><h2 id="pay">Paid</h2><p>Paid in full${
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
<h1>${invoiceTitle(invoice)} ${statusBadge(invoice.status)}</h1>
<section class="card" aria-label="Invoice details"><dl class="facts">
<div><dt>Invoice number</dt><dd data-testid="invoice-number">${invoice.number ?? html`<span class="muted">Given when final</span>`}</dd></div>
<div><dt>Billed to</dt><dd>${view.customerName}<div class="email">${view.customerEmail}</div></dd></div>
<div><dt>Issued</dt><dd>${formats.date(invoice.issuedAt)}</dd></div>
<div><dt>Period</dt><dd>${period(invoice.periodStart, invoice.periodEnd, formats)}</dd></div>
<div><dt>Total</dt><dd>${money(invoice.total)}</dd></div>
</dl></section>
${howToPay}
<section class="card" aria-labelledby="lines"><h2 id="lines">Lines</h2><div class="scroll"><table>
<thead><tr><th scope="col">Description</th><th scope="col" class="num wide">Quantity</th><th scope="col" class="num wide">Unit price</th><th scope="col" class="num">Amount</th></tr></thead>
<tbody>${
      invoice.lines.map((line) =>
        html`<tr><td>${line.description}${linePeriod(invoice, line, formats)}</td><td class="num wide">${
          line.quantity === null ? "" : formats.quantity(line.quantity)
        }</td><td class="num wide">${precise(line.unitPrice)}</td><td class="num">${precise(line.amount)}</td></tr>`
      )
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
</tfoot></table></div></section>
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
