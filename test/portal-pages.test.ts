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
import { expectError, ok } from "./billing-support.ts"
import { makePortalWorld, PAYMENT_INSTRUCTIONS, type PortalWorld, portalTokenOf, signedWith, tampered } from "./portal-fixtures.ts"

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
    expect(invoiceLinksOf(page.text)).toHaveLength(1)
    expect(page.text).not.toContain(world.neighbour.invoiceId)
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
