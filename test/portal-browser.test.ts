/**
 * The customer's pages in a real browser: Debian's Chromium driven by
 * playwright-core (which downloads no browser of its own). The suite skips
 * only where no Chromium is installed, and says so; `.ci/run` installs it.
 * Screenshots go to test-output/ (gitignored); `PORTAL_SCREENSHOTS_TO=docs/images`
 * also writes the README's two small ones there.
 */
import { Effect } from "effect"
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type BrowserContext, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SqlClient } from "@effect/sql"
import { ok } from "./billing-support.ts"
import { makePortalWorld, PAYMENT_INSTRUCTIONS, type PortalWorld, portalTokenOf, signedWith, tampered } from "./portal-fixtures.ts"
import { drain } from "./signals-fixtures.ts"
import { startTestApp, type TestApp } from "./support/TestApp.ts"

const chromiumPath = [process.env.CHROMIUM_PATH, "/usr/bin/chromium", "/usr/bin/chromium-browser"]
  .find((path): path is string => path !== undefined && path !== "" && existsSync(path))
if (chromiumPath === undefined) {
  console.warn("portal-browser.test.ts: SKIPPED, no Chromium installed (apt-get install chromium, or set CHROMIUM_PATH)")
}

const outputDir = "test-output"
const docsDir = process.env.PORTAL_SCREENSHOTS_TO

let app: TestApp
let world: PortalWorld
let context: BrowserContext
let profile: string

const usd = (amount: number) => new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" }).format(amount)

/**
 * Three weeks of history for the chart: the cycle is moved to have started 20
 * days ago and the usage rows are spread over those days. Only timestamps
 * move; every amount is what the worker priced.
 */
const backdate = (app: TestApp, customerId: string) =>
  app.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.all([
      sql`UPDATE purchases SET period_start = period_start - interval '20 days', period_end = period_end - interval '20 days',
            billing_date = billing_date - interval '20 days'
          WHERE customer_id = ${customerId}`,
      // Oldest row 20 days back, the newest today: the order of ids stays the order of time.
      // When the usage happened (the chart's day) moves with when it was recorded.
      sql`UPDATE usage_log u SET created_at = u.created_at - make_interval(days => (20 * (n.total - n.rank) / n.total)::int),
            occurred_at = u.occurred_at - make_interval(days => (20 * (n.total - n.rank) / n.total)::int)
          FROM (SELECT id, row_number() OVER (ORDER BY id) AS rank, count(*) OVER () AS total
                FROM usage_log WHERE customer_id = ${customerId}) n
          WHERE u.id = n.id`
    ])))

const screenshot = async (page: Page, name: string, width: number) => {
  await page.setViewportSize({ width, height: width < 500 ? 800 : 900 })
  await page.screenshot({ path: join(outputDir, `${name}.png`), fullPage: true })
}

/** The README's pictures: the top of a page at a given size, kept small. */
const docsScreenshot = async (page: Page, name: string, viewport: { width: number; height: number }) => {
  if (docsDir === undefined) return
  await page.setViewportSize(viewport)
  await page.screenshot({ path: join(docsDir, `${name}.png`) })
}

describe.skipIf(chromiumPath === undefined)("the customer's pages in Chromium", () => {
  beforeAll(async () => {
    mkdirSync(outputDir, { recursive: true })
    app = await startTestApp()
    world = await makePortalWorld(app)
    for (let i = 0; i < 24; i++) {
      ok(await world.api.post("/signal/credit", {
        customerId: world.customer.id,
        agentKey: "chat",
        usage: { model: "gpt-4o", inputTokens: 20_000 + ((i * 37_000) % 90_000), outputTokens: 5_000 + ((i * 11_000) % 30_000) }
      }), 202)
    }
    await drain(app)
    await backdate(app, world.customer.id)
    profile = mkdtempSync(join(tmpdir(), "portal-chromium-"))
    context = await chromium.launchPersistentContext(profile, {
      executablePath: chromiumPath!,
      headless: true,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync"
      ],
      locale: "en-US",
      timezoneId: "Asia/Tokyo",
      viewport: { width: 1100, height: 900 }
    })
  })

  afterAll(async () => {
    await context?.close()
    if (profile !== undefined) rmSync(profile, { recursive: true, force: true })
    await app?.close()
  })

  it("shows the portal, then the hosted invoice its link opens", async () => {
    const page = await context.newPage()
    const { url } = await portalTokenOf(world.api, world.customer.id)
    const response = await page.goto(url)
    expect(response?.status()).toBe(200)

    await expect.poll(() => page.getByRole("heading", { level: 1 }).textContent()).toContain(world.customer.name)
    expect(await page.getByText(world.plan.name).count()).toBeGreaterThan(0)
    expect(await page.getByText("1 used of 3").count()).toBe(1)
    const chart = page.locator("figure.chart svg[role=img]")
    expect(await chart.count()).toBe(1)
    expect(await chart.locator("rect.bar").count()).toBeGreaterThan(5)
    expect((await chart.boundingBox())!.height).toBeGreaterThan(100)
    const invoiceRow = page.getByRole("row").filter({ hasText: world.invoice.number })
    expect(await invoiceRow.textContent()).toContain(usd(world.invoice.total))
    // Dates are rewritten in the browser's time zone (Tokyo), not left in UTC.
    expect(await page.locator("footer time").textContent()).toMatch(/GMT\+9/)

    await screenshot(page, "portal-desktop", 1100)
    await screenshot(page, "portal-phone", 375)
    // Nothing wider than a phone's screen (tables scroll inside their card).
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375)
    await docsScreenshot(page, "portal", { width: 1000, height: 1040 })

    await page.setViewportSize({ width: 1100, height: 900 })
    await invoiceRow.getByRole("link").click()
    await page.waitForURL(/\/pay\//)
    await expect.poll(() => page.locator("h1").textContent()).toContain("Plan invoice")
    expect(await page.locator("h1 .badge").textContent()).toBe("OPEN")
    expect(await page.getByTestId("invoice-total").textContent()).toBe(usd(world.invoice.total))
    expect(await page.getByRole("row").filter({ hasText: "VAT (20%)" }).count()).toBe(1)
    expect(await page.locator("tbody tr").count()).toBe(3)
    expect(await page.getByTestId("payment-instructions").textContent()).toBe(PAYMENT_INSTRUCTIONS)
    // The number a person can quote, in the details and in the payment instructions.
    expect(world.invoice.number).toMatch(/^INV-\d{6}$/)
    expect(await page.getByTestId("invoice-number").textContent()).toBe(world.invoice.number)
    expect(await page.getByTestId("quote-number").textContent()).toBe(world.invoice.number)
    expect(await page.title()).toContain(world.invoice.number)
    await screenshot(page, "invoice-desktop", 1100)
    await screenshot(page, "invoice-phone", 375)
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375)
    await docsScreenshot(page, "invoice", { width: 375, height: 1160 })
    await page.close()
  })

  it("answers a tampered, expired or edited link with a 4xx page and no one's data", async () => {
    const page = await context.newPage()
    const { token } = await portalTokenOf(world.api, world.customer.id)
    const tamperedPortal = await page.goto(`${world.origin}/portal?token=${encodeURIComponent(tampered(token))}`)
    expect(tamperedPortal?.status()).toBe(401)
    expect(await page.locator("h1").textContent()).toBe("This link is not valid")
    await screenshot(page, "refused-phone", 375)

    const link = new URL(ok(await world.api.post(`/invoices/${world.invoice.id}/pay-link`)).url)
    const payToken = link.searchParams.get("token")!
    const tamperedPay = await page.goto(`${world.origin}/pay/${world.invoice.id}?token=${encodeURIComponent(tampered(payToken))}`)
    expect(tamperedPay?.status()).toBe(401)

    const expired = await signedWith(app, world.acme.organizationId, "pl", {
      org: world.acme.organizationId,
      customerId: world.customer.id,
      invoiceId: world.invoice.id,
      exp: Date.now() - 1000
    })
    const expiredPay = await page.goto(`${world.origin}/pay/${world.invoice.id}?token=${encodeURIComponent(expired)}`)
    expect(expiredPay?.status()).toBe(401)
    expect(await page.locator("h1").textContent()).toBe("This link has expired")

    // The same genuine token with another customer's invoice (or another organisation's) in the path.
    for (const invoiceId of [world.neighbour.invoiceId, world.stranger.invoiceId]) {
      const edited = await page.goto(`${world.origin}/pay/${invoiceId}?token=${encodeURIComponent(payToken)}`)
      expect(edited?.status()).toBe(401)
      expect(await page.content()).not.toContain(invoiceId)
    }
    await page.close()
  })
})
