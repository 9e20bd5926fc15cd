/**
 * The customer's pages over plain HTTP: what they show, that every value is
 * escaped, and that no link reaches what its token does not name. What a
 * person sees in a real browser is test/portal-browser.test.ts.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Invoices } from "../src/billing/Invoices.ts"
import { withoutTokens } from "../src/app/Server.ts"
import { Organizations } from "../src/organizations/Organizations.ts"
import { startTestApp, type TestApp } from "./support/TestApp.ts"
import { clientOf, expectError, ok, runCycles } from "./billing-support.ts"
import {
  BILLING_CONTACT,
  holdAndCorrect,
  makePortalWorld,
  PAYMENT_INSTRUCTIONS,
  type PortalWorld,
  portalTokenOf,
  signedWith,
  tampered
} from "./portal-fixtures.ts"

let app: TestApp
let world: PortalWorld

beforeAll(async () => {
  app = await startTestApp()
  world = await makePortalWorld(app, "Jo <script>alert(1)</script> & Co")
})
afterAll(() => app.close())

const open = async (url: string) => {
  const response = await fetch(url.startsWith("http") ? url : `${world.origin}${url}`)
  return { status: response.status, text: await response.text(), headers: response.headers }
}

const expectRefused = async (url: string, status: number, title: RegExp) => {
  const page = await open(url)
  expect(page.status, page.text.slice(0, 300)).toBe(status)
  expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8")
  expect(page.text).toMatch(title)
  expect(page.text).not.toContain(world.customer.id)
}

const invoiceLinksOf = (html: string) => [...html.matchAll(/href="(\/pay\/[^"]+)"/g)].map((m) => m[1]!.replaceAll("&amp;", "&"))

const usd = (amount: number) => new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" }).format(amount)

/** The text a person reads of a piece of the page: tags dropped, entities decoded, spaces collapsed. */
const textOf = (html: string) =>
  html.replace(/<script[\s\S]*?<\/script>|<style[\s\S]*?<\/style>/g, "")
    .replace(/<\/?(br|div|p|td|th|tr|li|dt|dd|h\d|section|address|table|thead|tbody|tfoot|ul|dl|header|main|footer|figcaption|summary|details)\b[^>]*>/g, " ")
    .replace(/<[^>]+>/g, "")
    .replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, "\"").replace(/&#39;/g, "'").replace(/&amp;/g, "&")
    .replace(/\s+/g, " ").trim()

/** The HTML of the element carrying `data-testid="id"` up to its closing tag (no nesting of the same tag inside). */
const byTestId = (html: string, id: string) => {
  const match = new RegExp(`<(\\w+)[^>]*data-testid="${id}"[^>]*>([\\s\\S]*?)</\\1>`).exec(html)
  expect(match, `data-testid="${id}"`).not.toBeNull()
  return match![2]!
}

/** The section with the heading id `id`. */
const sectionOf = (html: string, id: string) => {
  const match = new RegExp(`<section[^>]*aria-labelledby="${id}"[\\s\\S]*?</section>`).exec(html)
  expect(match, `section ${id}`).not.toBeNull()
  return match![0]
}

describe("GET /portal", () => {
  it("shows the token's customer their plan, balances, usage chart and invoices, every value escaped", async () => {
    const { url } = await portalTokenOf(world.api, world.customer.id)
    expect(url.startsWith(`${world.origin}/portal?token=pt_`)).toBe(true)
    const page = await open(url)
    expect(page.status).toBe(200)
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8")
    expect(page.headers.get("cache-control")).toBe("no-store")
    expect(page.headers.get("referrer-policy")).toBe("no-referrer")
    expect(page.headers.get("content-security-policy")).toMatch(/default-src 'none'.*script-src 'sha256-/)
    expect(page.text).toContain(world.plan.name)
    expect(page.text).toContain("Jo &lt;script&gt;alert(1)&lt;/script&gt; &amp; Co")
    expect(page.text).not.toContain("<script>alert(1)")
    // The wallet, the 2,000 prepaid credits and 3 seats: 1 seat used, 2 left.
    expect(page.text).toContain("Wallet")
    expect(page.text).toMatch(/1 used of 3/)
    expect(page.text).toMatch(/<svg[^>]*role="img"/)
    expect(page.text).toMatch(/<rect class="bar" data-day="\d{4}-\d{2}-\d{2}" data-meter="CREDIT"/)
    expect(page.text).toMatch(/data-meter="UNIT"/)
    // The invoice's total, in dollars and cents, and a link to its hosted page.
    expect(page.text).toContain(new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" }).format(world.invoice.total))
    // Linked twice: under what is owed (it is OPEN) and in the invoice list.
    expect(invoiceLinksOf(page.text)).toHaveLength(2)
    expect(new Set(invoiceLinksOf(page.text)).size).toBe(1)
    expect(page.text).not.toContain(world.neighbour.invoiceId)
  })

  it("shows what is owed, the upcoming invoice, what is held, corrections labelled, and what the usage total is made of", async () => {
    const { reversal, reversed } = await holdAndCorrect(world)
    const page = await open((await portalTokenOf(world.api, world.customer.id)).url)
    expect(page.status).toBe(200)
    const invoice = ok(await world.api.get(`/invoices/${world.invoice.id}`)).invoice

    // What is owed: the OPEN invoice, its amount due and its due date (the organisation's 14-day terms).
    const owed = sectionOf(page.text, "owed")
    expect(textOf(byTestId(owed, "owed-total"))).toBe(usd(invoice.amountDue ?? invoice.total))
    expect(textOf(owed)).toContain("1 open invoice")
    expect(invoice.dueDate).toBe(new Date(new Date(invoice.issuedAt).getTime() + 14 * 86_400_000).toISOString())
    expect(owed).toContain(`<time datetime="${invoice.dueDate}" data-style="date">`)
    expect(owed).not.toContain("Overdue")

    // The upcoming invoices, as GET /invoices/upcoming previews them: their date, in UTC with its zone, and their sum.
    const upcoming = ok(await world.api.get(`/invoices/upcoming?customerId=${world.customer.id}`)).invoices as Array<{
      kind: string
      total: number
      issuedAt: string
    }>
    expect(upcoming.map((item) => item.kind)).toEqual(["USAGE", "PLAN"])
    const summary = textOf(byTestId(page.text, "upcoming-summary"))
    const inAll = upcoming.reduce((acc, item) => acc + Math.round(item.total * 100), 0) / 100
    expect(summary).toContain(`${usd(inAll)} in all over 2 invoices`)
    expect(summary).toMatch(/^On [A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d{2} [AP]M UTC,/)
    expect(page.text).toContain(`<time datetime="${upcoming[0]!.issuedAt}" data-style="datetime">`)
    expect(textOf(sectionOf(page.text, "upcoming"))).toContain("Pages parsed (usage)")

    // What the holds keep back, in words and on the tiles.
    expect(textOf(byTestId(page.text, "holds"))).toContain("Held for requests in progress: $1.50 of the wallet and 0.2 Assistant credits.")
    expect([...page.text.matchAll(/data-testid="tile-held">([^<]*)</g)].map((m) => m[1])).toEqual(["$1.50 held", "0.2 held"])

    // The correction is labelled as one, and the row it takes back says so; its cost keeps its sign.
    const correction = /<tr class="correction" data-testid="correction">([\s\S]*?)<\/tr>/.exec(page.text)
    expect(correction).not.toBeNull()
    expect(textOf(correction![1]!)).toContain("Correction Pages parsed Takes back an earlier use")
    expect(textOf(correction![1]!)).toContain(`-${usd(-reversal.customerCost)}`)
    expect(reversal.customerCost).toBe(-reversed.customerCost)
    expect(textOf(page.text)).toContain("Taken back by a correction.")

    // "$X in all" beside "usage charges $Y": the difference is what prepaid allowances covered.
    const plan = ok(await world.api.get(`/customers/${world.customer.id}/plan`)).plan
    const rows = ok(await world.api.get(`/signal/usage-log?customerId=${world.customer.id}&limit=200`)).usageLogs as Array<{ customerCost: number }>
    const cents = (amount: number) => Math.round(amount * 100)
    const total = rows.reduce((acc, row) => acc + row.customerCost, 0)
    const explained = textOf(byTestId(page.text, "usage-explained"))
    expect(explained).toBe(
      `${usd(cents(total) / 100)} in all: ${usd(cents(plan.spentThisCycle) / 100)} of it is charged (billed after the cycle, or taken ` +
        `from the wallet as it was used), the plan's usage charges above; the other ${
          usd((cents(total) - cents(plan.spentThisCycle)) / 100)
        } was drawn from allowances the plan price already paid for, and is not charged again.`
    )
    expect(textOf(sectionOf(page.text, "plan"))).toContain(`Usage charges this cycle ${usd(plan.spentThisCycle)}`)

    // Every time of day carries its zone when scripts are off (the script rewrites it into the browser's, named too).
    const times = [...page.text.matchAll(/<time datetime="[^"]+" data-style="(short|datetime)">([^<]*)<\/time>/g)]
    expect(times.length).toBeGreaterThan(10)
    for (const [, , text] of times) expect(text).toMatch(/UTC$/)
  })

  it("says an empty cycle has no usage instead of drawing empty axes", async () => {
    const page = await open((await portalTokenOf(world.api, world.neighbour.id)).url)
    expect(page.status).toBe(200)
    const usage = sectionOf(page.text, "usage")
    expect(textOf(usage)).toContain("No usage to chart in this period yet.")
    expect(usage).not.toContain("<svg")
    expect(page.text).not.toContain("$4.00")
  })

  it("draws the chart twice, laid out for a desktop and a phone, the axis title above its ticks", async () => {
    const page = await open((await portalTokenOf(world.api, world.customer.id)).url)
    const svgs = [...page.text.matchAll(/<svg class="(wide|narrow)" viewBox="0 0 (\d+) (\d+)"[\s\S]*?<\/svg>/g)]
    expect(svgs.map((m) => m[1])).toEqual(["wide", "narrow"])
    for (const [svg, , width] of svgs) {
      // The day labels' centres far enough apart for "Dec 10" (about 45 units at 12) and a gap.
      const xs = [...svg.matchAll(/<text class="tick x" x="([\d.]+)"/g)].map((m) => Number(m[1]))
      expect(xs.length).toBeGreaterThan(1)
      for (let i = 1; i < xs.length; i++) expect(xs[i]! - xs[i - 1]!).toBeGreaterThanOrEqual(50)
      for (const x of xs) expect(x + 23).toBeLessThanOrEqual(Number(width))
      // The axis title sits on the first line, above the top tick (y 30 and below).
      expect(svg).toMatch(/<text class="axis-title y" x="0" y="13">Cost \(USD\)<\/text>/)
      const tickYs = [...svg.matchAll(/<text class="tick y" x="[\d.]+" y="([\d.]+)"/g)].map((m) => Number(m[1]))
      expect(Math.min(...tickYs)).toBeGreaterThanOrEqual(30)
    }
  })

  it("answers a missing, garbled, tampered, expired or foreign token with a 401 page", async () => {
    const { token } = await portalTokenOf(world.api, world.customer.id)
    await expectRefused("/portal", 401, /not valid/)
    await expectRefused("/portal?token=nonsense", 401, /not valid/)
    await expectRefused(`/portal?token=${encodeURIComponent(tampered(token))}`, 401, /not valid/)
    const expired = await signedWith(app, world.acme.organizationId, "pt", {
      org: world.acme.organizationId,
      customerId: world.customer.id,
      exp: Date.now() - 1000
    })
    await expectRefused(`/portal?token=${encodeURIComponent(expired)}`, 401, /expired/)
    // Signed by the other organisation but claiming this one, or naming this one's customer under the other.
    const forged = await signedWith(app, world.stranger.tenant.organizationId, "pt", {
      org: world.acme.organizationId,
      customerId: world.customer.id,
      exp: Date.now() + 60_000
    })
    await expectRefused(`/portal?token=${encodeURIComponent(forged)}`, 401, /not valid/)
    const elsewhere = await signedWith(app, world.stranger.tenant.organizationId, "pt", {
      org: world.stranger.tenant.organizationId,
      customerId: world.customer.id,
      exp: Date.now() + 60_000
    })
    await expectRefused(`/portal?token=${encodeURIComponent(elsewhere)}`, 404, /Not found/)
    // A payload edited to name the neighbour keeps the old signature.
    const [payload, signature] = token.slice(3).split(".")
    const claims = JSON.parse(Buffer.from(payload!, "base64url").toString())
    const edited = `pt_${Buffer.from(JSON.stringify({ ...claims, customerId: world.neighbour.id })).toString("base64url")}.${signature}`
    await expectRefused(`/portal?token=${encodeURIComponent(edited)}`, 401, /not valid/)
    // An organisation that does not exist gets no signing key made for it.
    const ghost = `pt_${Buffer.from(JSON.stringify({ ...claims, org: "org_ghost" })).toString("base64url")}.${signature}`
    await expectRefused(`/portal?token=${encodeURIComponent(ghost)}`, 401, /not valid/)
  })
})

describe("GET /pay/{invoiceId}", () => {
  it("shows the invoice with its lines, tax, total, and the payment instructions while OPEN", async () => {
    const portal = await open((await portalTokenOf(world.api, world.customer.id)).url)
    const [link] = invoiceLinksOf(portal.text)
    const page = await open(link!)
    expect(page.status).toBe(200)
    // The customer quotes the invoice's number (the organisation's first), not its id.
    expect(world.invoice.number).toMatch(/^INV-\d{6}$/)
    expect(page.text).toContain(`<dd data-testid="invoice-number">${world.invoice.number}</dd>`)
    expect(page.text).toContain(`Please quote <strong data-testid="quote-number">${world.invoice.number}</strong>`)
    expect(page.text).toMatch(/class="badge OPEN"/)
    expect(page.text).toContain("VAT (20%)")
    expect(page.text).toContain(new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" }).format(world.invoice.total))
    expect(page.text).toContain(PAYMENT_INSTRUCTIONS.split("\n")[0])
  })

  it("shows the organisation's billing contact, the due date, and a unit price on every FLAT unit line", async () => {
    const link = ok(await world.api.post(`/invoices/${world.invoice.id}/pay-link`)).url
    const page = await open(link)
    expect(page.status).toBe(200)
    const invoice = ok(await world.api.get(`/invoices/${world.invoice.id}`)).invoice
    // The contact: the e-mail address as a mail link, then the address a line each.
    const contact = byTestId(page.text, "billing-contact")
    expect(contact).toContain(`<a href="mailto:${BILLING_CONTACT.email}">${BILLING_CONTACT.email}</a>`)
    expect(textOf(contact)).toBe(`${BILLING_CONTACT.email} ${BILLING_CONTACT.addressLines.join(" ")}`)
    expect(contact.match(/<br>/g)).toHaveLength(BILLING_CONTACT.addressLines.length)
    expect(textOf(page.text)).toContain(`From Acme AI ${BILLING_CONTACT.email}`)
    // Due 14 days after it became final; not overdue.
    expect(byTestId(page.text, "due-date")).toContain(`<time datetime="${invoice.dueDate}" data-style="date">`)
    expect(textOf(byTestId(page.text, "due-date"))).toMatch(/^Due [A-Z][a-z]{2} \d{1,2}, \d{4}\.$/)
    expect(textOf(byTestId(page.text, "amount-due"))).toBe(usd(invoice.amountDue ?? invoice.total))
    // Seats are a FLAT unit: its prepaid line carries no unit price (`unitPrice: null`); the page shows the unit's, $12.50.
    const seats = invoice.lines.find((line: { description: string }) => line.description === "Seats (prepaid)")
    expect(seats).toMatchObject({ quantity: 3, unitPrice: null, amount: 37.5 })
    const row = new RegExp(`<tr><td>Seats \\(prepaid\\)[\\s\\S]*?</tr>`).exec(page.text)![0]
    expect(textOf(byTestId(row, "unit-price"))).toBe("$12.50")
    // On a phone the quantity and unit price columns give way to a line under the description, which says both.
    expect(textOf(byTestId(row, "line-quantity"))).toBe("3 \u00d7 $12.50")
    // The credits' line carries its own unit price; the wallet credit, a flat amount, none.
    const credits = new RegExp(`<tr><td>Assistant credits \\(prepaid\\)[\\s\\S]*?</tr>`).exec(page.text)![0]
    const creditLine = invoice.lines.find((line: { description: string }) => line.description === "Assistant credits (prepaid)")
    expect(textOf(byTestId(credits, "unit-price"))).toBe(
      new Intl.NumberFormat("en-US", { style: "currency", currency: "USD", maximumFractionDigits: 6 }).format(creditLine.unitPrice)
    )
    const walletRow = new RegExp(`<tr><td>Wallet \\(wallet credit\\)[\\s\\S]*?</tr>`).exec(page.text)![0]
    expect(textOf(byTestId(walletRow, "unit-price"))).toBe("")
    expect(walletRow).not.toContain("line-quantity")
  })

  it("without a billing contact or payment instructions, names the organisation alone", async () => {
    const link = ok(await clientOf(app, world.stranger.tenant).post(`/invoices/${world.stranger.invoiceId}/pay-link`)).url
    const page = await open(link)
    expect(page.status).toBe(200)
    expect(page.text).not.toContain("billing-contact")
    expect(page.text).not.toContain("mailto:")
    expect(textOf(page.text)).toMatch(/Contact Other Org to pay this invoice, quoting INV-\d{6}\./)
    // A FLAT unit of $7 prepaid once: its unit price is the flat price.
    expect(textOf(byTestId(page.text, "unit-price"))).toBe("$7.00")
  })

  it("opens from the pay-link route, at BILLING_PUBLIC_URL when it is set", async () => {
    const link = ok(await world.api.post(`/invoices/${world.invoice.id}/pay-link`))
    expect(link.url.startsWith(`${world.origin}/pay/${world.invoice.id}?token=pl_`)).toBe(true)
    expect((await open(link.url)).status).toBe(200)
    process.env.BILLING_PUBLIC_URL = "https://billing.example.com/acme/"
    try {
      const published = ok(await world.api.post(`/invoices/${world.invoice.id}/pay-link`))
      expect(published.url.startsWith(`https://billing.example.com/acme/pay/${world.invoice.id}?token=pl_`)).toBe(true)
      const token = ok(await world.api.post("/portal/token", { customerId: world.customer.id }))
      expect(token.url.startsWith("https://billing.example.com/acme/portal?token=pt_")).toBe(true)
    } finally {
      delete process.env.BILLING_PUBLIC_URL
    }
  })

  it("refuses a link edited to another invoice, a tampered or expired link, and a portal token", async () => {
    const link = new URL(ok(await world.api.post(`/invoices/${world.invoice.id}/pay-link`)).url)
    const token = link.searchParams.get("token")!
    await expectRefused(`/pay/${world.neighbour.invoiceId}?token=${encodeURIComponent(token)}`, 401, /not valid/)
    await expectRefused(`/pay/${world.stranger.invoiceId}?token=${encodeURIComponent(token)}`, 401, /not valid/)
    await expectRefused(`/pay/${world.invoice.id}?token=${encodeURIComponent(tampered(token))}`, 401, /not valid/)
    await expectRefused(`/pay/${world.invoice.id}`, 401, /not valid/)
    const expired = await signedWith(app, world.acme.organizationId, "pl", {
      org: world.acme.organizationId,
      customerId: world.customer.id,
      invoiceId: world.invoice.id,
      exp: Date.now() - 1000
    })
    await expectRefused(`/pay/${world.invoice.id}?token=${encodeURIComponent(expired)}`, 401, /expired/)
    const { token: portalToken } = await portalTokenOf(world.api, world.customer.id)
    await expectRefused(`/pay/${world.invoice.id}?token=${encodeURIComponent(portalToken)}`, 401, /not valid/)
    // A genuine link naming the neighbour's invoice under this customer: the invoice is not theirs.
    const mismatched = await signedWith(app, world.acme.organizationId, "pl", {
      org: world.acme.organizationId,
      customerId: world.customer.id,
      invoiceId: world.neighbour.invoiceId,
      exp: Date.now() + 60_000
    })
    await expectRefused(`/pay/${world.neighbour.invoiceId}?token=${encodeURIComponent(mismatched)}`, 404, /Not found/)
  })

  it("shows PAID with no instructions once paid, and the API still refuses a pay link", async () => {
    // An invoice of its own to pay: the other tests read theirs OPEN.
    const paid = await makePortalWorld(app, "Paid Co")
    const link = ok(await paid.api.post(`/invoices/${paid.invoice.id}/pay-link`)).url
    await app.run(Effect.flatMap(Invoices, (invoices) => invoices.pay(paid.acme.organizationId, paid.invoice.id, { reference: "bank-1" })))
    const page = await open(link)
    expect(page.status).toBe(200)
    expect(page.text).toMatch(/class="badge PAID"/)
    expect(page.text).not.toContain(PAYMENT_INSTRUCTIONS.split("\n")[0])
    expectError(await paid.api.post(`/invoices/${paid.invoice.id}/pay-link`), 409, "invoice_not_open")
  })
})

describe("payment instructions", () => {
  it("are set and cleared with billing org settings --payment-instructions", async () => {
    const org = world.stranger.tenant.organizationId
    const set = await app.cli(["org", "settings", "--org", org, "--payment-instructions", "Pay by card at https://pay.example.com", "--json"])
    expect(set.code, set.stderr).toBe(0)
    expect(set.json.organization.paymentInstructions).toBe("Pay by card at https://pay.example.com")
    const cleared = await app.cli(["org", "settings", "--org", org, "--payment-instructions", "", "--json"])
    expect(cleared.json.organization.paymentInstructions).toBeNull()
    const stored = await app.run(Effect.flatMap(Organizations, (organizations) => organizations.get(org)))
    expect(stored.paymentInstructions).toBeNull()
    const tooLong = await app.cli(["org", "settings", "--org", org, "--payment-instructions", "x".repeat(2001)])
    expect(tooLong.code).not.toBe(0)
  })

  it("billing portal token prints the portal URL", async () => {
    const minted = await app.cli(["portal", "token", world.customer.id, "--org", world.acme.organizationId, "--json"], {
      BILLING_PUBLIC_URL: world.origin
    })
    expect(minted.code, minted.stderr).toBe(0)
    expect(minted.json.url).toBe(`${world.origin}/portal?token=${encodeURIComponent(minted.json.token)}`)
    expect((await open(minted.json.url)).status).toBe(200)
  })
})

describe("the request log", () => {
  it("keeps the pages' paths but not their tokens", () => {
    expect(withoutTokens("/portal?token=pt_abc.def")).toBe("/portal?token=[redacted]")
    expect(withoutTokens("/pay/inv_1?x=1&token=pl_abc.def&y=2")).toBe("/pay/inv_1?x=1&token=[redacted]&y=2")
    expect(withoutTokens("/api/v1/customers?limit=5")).toBe("/api/v1/customers?limit=5")
  })
})

describe("an overdue invoice", () => {
  it("is marked on the portal and on its page once the cycle job marks it", async () => {
    // A database of its own: the cycle job marks every organisation's invoices past their due date.
    const own = await startTestApp({ ownDatabase: true })
    try {
      const late = await makePortalWorld(own, "Late Payer", { paymentTermsDays: 0 })
      await runCycles(own, new Date(Date.now() + 1000))
      const invoice = ok(await late.api.get(`/invoices/${late.invoice.id}`)).invoice
      expect(invoice).toMatchObject({ status: "OPEN", overdue: true })
      const portal = await fetch((await portalTokenOf(late.api, late.customer.id)).url).then((r) => r.text())
      const owed = sectionOf(portal, "owed")
      expect(textOf(byTestId(owed, "owed-overdue"))).toBe("1 overdue")
      expect(textOf(owed)).toContain("Overdue")
      expect(portal).toMatch(/class="badge OPEN">OPEN<\/span> <span class="badge OVERDUE">Overdue<\/span>/)
      const page = await fetch(ok(await late.api.post(`/invoices/${late.invoice.id}/pay-link`)).url).then((r) => r.text())
      expect(page).toMatch(/<h1>Plan invoice <span class="badge OPEN">OPEN<\/span> <span class="badge OVERDUE">Overdue<\/span><\/h1>/)
      expect(textOf(byTestId(page, "due-date"))).toMatch(/^Overdue: it was due [A-Z][a-z]{2} \d{1,2}, \d{4}\.$/)
    } finally {
      await own.close()
    }
  })
})

describe("the usage chart's ranges", () => {
  /** The chart's range links: [label, href, shown]. */
  const rangesOf = (html: string) =>
    [...byTestId(html, "usage-ranges").matchAll(/<a href="([^"]+)"( aria-current="page")?>([^<]*)<\/a>/g)].map((m) => ({
      label: m[3]!.replace(/&amp;/g, "&"),
      href: m[1]!.replaceAll("&amp;", "&"),
      shown: m[2] !== undefined
    }))
  const inAll = (html: string) => /, (\$[\d.,]+) in all\./.exec(textOf(sectionOf(html, "usage")))?.[1]

  it("offers this cycle, the ended cycles and the last 12 months, each a link to the page that charts it", async () => {
    // A database of its own: the cycle job ends every organisation's cycles.
    const own = await startTestApp({ ownDatabase: true })
    try {
      const long = await makePortalWorld(own, "Long Customer")
      const { token, url } = await portalTokenOf(long.api, long.customer.id)
      const page = (query: string) => fetch(`${url}${query}`).then((r) => r.text())

      const first = await page("")
      expect(rangesOf(first)).toEqual([
        { label: "This cycle", href: `?token=${encodeURIComponent(token)}&usage=cycle`, shown: true },
        { label: "Last 12 months", href: `?token=${encodeURIComponent(token)}&usage=12-months`, shown: false }
      ])
      const cycleTotal = inAll(first)
      expect(cycleTotal).toMatch(/^\$/)

      // The last 12 months, a bar a month: this month's holds the same usage as this cycle.
      const year = await page("&usage=12-months")
      expect(textOf(sectionOf(year, "usage"))).toContain("Usage, last 12 months")
      expect(rangesOf(year).find((range) => range.shown)?.label).toBe("Last 12 months")
      const month = new Date().toISOString().slice(0, 7)
      expect(year).toMatch(new RegExp(`<rect class="bar" data-month="${month}" data-meter="CREDIT"`))
      expect(year).not.toContain("data-day=")
      expect(textOf(sectionOf(year, "usage"))).toContain("Month (UTC)")
      expect(inAll(year)).toBe(cycleTotal)
      expect(year).not.toContain("usage-explained")

      // The cycle ends: it is offered by its dates, and this cycle has nothing yet.
      const [purchase] = ok(await long.api.get(`/purchases?customerId=${long.customer.id}`)).purchases
      await runCycles(own, new Date(purchase.currentPeriodEnd))
      const after = await page("")
      const ranges = rangesOf(after)
      expect(ranges.map((range) => range.href)).toEqual([
        `?token=${encodeURIComponent(token)}&usage=cycle`,
        `?token=${encodeURIComponent(token)}&usage=cycle-1`,
        `?token=${encodeURIComponent(token)}&usage=12-months`
      ])
      const shortDay = (iso: string) => new Intl.DateTimeFormat("en-US", { timeZone: "UTC", day: "numeric", month: "short" }).format(new Date(iso))
      expect(ranges[1]!.label).toBe(`${shortDay(purchase.currentPeriodStart)} \u2013 ${shortDay(purchase.currentPeriodEnd)}`)
      expect(textOf(sectionOf(after, "usage"))).toContain("No usage to chart in this period yet.")

      const previous = await page("&usage=cycle-1")
      expect(textOf(sectionOf(previous, "usage"))).toContain(`Usage, previous cycle (${ranges[1]!.label})`)
      expect(previous).toMatch(new RegExp(`<rect class="bar" data-day="${new Date().toISOString().slice(0, 10)}" data-meter="UNIT"`))
      expect(inAll(previous)).toBe(cycleTotal)

      // A range the page does not know, or an ended cycle the customer does not have, is this cycle.
      for (const query of ["&usage=bogus", "&usage=cycle-5", "&usage=cycle-0"]) {
        const shown = await page(query)
        expect(rangesOf(shown).find((range) => range.shown)?.label, query).toBe("This cycle")
        expect(textOf(sectionOf(shown, "usage")), query).toContain("Usage this cycle")
      }
    } finally {
      await own.close()
    }
  })
})
