/**
 * The customer's pages in a real browser: Debian's Chromium driven by
 * playwright-core (which downloads no browser of its own). The suite skips
 * only where no Chromium is installed, and says so; `.ci/run` installs it.
 * Every check runs at a desktop's 1280 px and a phone's 375 px, on the text a
 * person sees and on where things are drawn (the chart's labels must not
 * touch). Full-page screenshots of each go to test-output/ (gitignored), named
 * `<page>-<width>.png`; `PORTAL_SCREENSHOTS_TO=docs/images` also writes the
 * README's two small ones there.
 */
import { Effect } from "effect"
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type BrowserContext, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SqlClient } from "@effect/sql"
import { ok } from "./billing-support.ts"
import { runCycles } from "./billing-support.ts"
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
      // The cycle stays a calendar month from its start (the start plus a month, as the cycle job computes it).
      sql`UPDATE purchases SET period_start = period_start - interval '20 days',
            period_end = period_start - interval '20 days' + interval '1 month',
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

const widths = [1280, 375] as const

const atWidth = (page: Page, width: number) => page.setViewportSize({ width, height: width < 500 ? 800 : 900 })

const screenshot = async (page: Page, name: string, width: number) => {
  await atWidth(page, width)
  await page.screenshot({ path: join(outputDir, `${name}-${width}.png`), fullPage: true })
}

/** The visible text of the first element carrying `data-testid="id"`, spaces collapsed. */
const visibleText = async (page: Page, id: string) =>
  ((await page.getByTestId(id).first().innerText()) ?? "").replace(/\s+/g, " ").trim()

interface Box {
  readonly x: number
  readonly y: number
  readonly width: number
  readonly height: number
}

/**
 * Where the chart shown at this width draws its text: the day labels, the
 * value ticks and the two axis titles, as laid out on the screen (only the
 * drawing the stylesheet shows; the other is display: none).
 */
const chartText = (page: Page) =>
  page.evaluate(() => {
    const box = (element: Element) => {
      const r = element.getBoundingClientRect()
      return { x: r.x, y: r.y, width: r.width, height: r.height }
    }
    const svg = Array.from(document.querySelectorAll("figure.chart svg")).find((s) => s.getBoundingClientRect().width > 0)!
    return {
      which: svg.getAttribute("class"),
      svg: box(svg),
      days: Array.from(svg.querySelectorAll("text.tick.x")).map((t) => ({ text: t.textContent ?? "", ...box(t) })),
      ticks: Array.from(svg.querySelectorAll("text.tick.y")).map((t) => ({ text: t.textContent ?? "", ...box(t) })),
      yTitle: box(svg.querySelector("text.axis-title.y")!),
      xTitle: box(svg.querySelector("text.axis-title.x")!),
      fontSize: Number.parseFloat(getComputedStyle(svg.querySelector("text.tick.x")!).fontSize),
      scale: svg.getBoundingClientRect().width / (svg as SVGSVGElement).viewBox.baseVal.width
    }
  })

const overlaps = (a: Box, b: Box) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height
const inside = (inner: Box, outer: Box) =>
  inner.x >= outer.x - 0.5 && inner.y >= outer.y - 0.5 && inner.x + inner.width <= outer.x + outer.width + 0.5 &&
  inner.y + inner.height <= outer.y + outer.height + 0.5

/** Nothing of the chart's text touches anything else of it, and all of it is inside the drawing. */
const expectChartLegible = async (page: Page, width: number) => {
  const chart = await chartText(page)
  expect(chart.which).toBe(width < 641 ? "narrow" : "wide")
  // Text drawn at about the size of the page's own small text, not shrunk with the drawing.
  expect(chart.fontSize * chart.scale).toBeGreaterThanOrEqual(11)
  expect(chart.days.length).toBeGreaterThanOrEqual(3)
  const days = [...chart.days].sort((a, b) => a.x - b.x)
  for (let i = 1; i < days.length; i++) {
    // Apart, with a gap: "Dec 10Dec 14" is what this rules out.
    expect(days[i]!.x - (days[i - 1]!.x + days[i - 1]!.width), `${days[i - 1]!.text} / ${days[i]!.text}`).toBeGreaterThanOrEqual(4)
  }
  const all = [...chart.days, ...chart.ticks, { text: "y title", ...chart.yTitle }, { text: "x title", ...chart.xTitle }]
  for (const [i, a] of all.entries()) {
    expect(inside(a, chart.svg), `${a.text} inside the chart`).toBe(true)
    for (const b of all.slice(i + 1)) expect(overlaps(a, b), `${a.text} overlaps ${b.text}`).toBe(false)
  }
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
    // A database of its own: the cycle job below marks every organisation's invoices past their due date.
    app = await startTestApp({ ownDatabase: true })
    // Terms of 0 days: the plan invoice is due when issued, so the cycle job marks it overdue.
    world = await makePortalWorld(app, "Jo's Robots", { paymentTermsDays: 0 })
    for (let i = 0; i < 24; i++) {
      ok(await world.api.post("/signal/credit", {
        customerId: world.customer.id,
        agentKey: "chat",
        usage: { model: "gpt-4o", inputTokens: 20_000 + ((i * 37_000) % 90_000), outputTokens: 5_000 + ((i * 11_000) % 30_000) }
      }), 202)
    }
    await drain(app)
    await backdate(app, world.customer.id)
    await holdAndCorrect(world)
    await runCycles(app, new Date(Date.now() + 1000))
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
    const invoice = ok(await world.api.get(`/invoices/${world.invoice.id}`)).invoice
    const upcoming = ok(await world.api.get(`/invoices/upcoming?customerId=${world.customer.id}`)).invoices as Array<{ total: number }>

    for (const width of widths) {
      await atWidth(page, width)
      await expect.poll(() => page.getByRole("heading", { level: 1 }).textContent()).toContain(world.customer.name)
      expect(await page.getByText(world.plan.name).count()).toBeGreaterThan(0)
      expect(await page.getByText("1 used of 3").count()).toBe(1)
      // What is owed: the overdue plan invoice.
      expect(await visibleText(page, "owed-total")).toBe(usd(invoice.amountDue ?? invoice.total))
      expect(await visibleText(page, "owed-overdue")).toBe("1 overdue")
      expect(await page.getByTestId("owed-invoices").getByText("Overdue").isVisible()).toBe(true)
      // The upcoming invoices: when, in Tokyo time with its zone, and how much.
      const inAll = upcoming.reduce((acc, item) => acc + Math.round(item.total * 100), 0) / 100
      const upcomingSummary = await visibleText(page, "upcoming-summary")
      expect(upcomingSummary).toMatch(/^On [A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d{2} [AP]M GMT\+9, /)
      expect(upcomingSummary).toContain(`, ${usd(inAll)} in all over 2 invoices`)
      // What is held, in words and on the tiles.
      expect(await visibleText(page, "holds")).toContain("Held for requests in progress: $1.50 of the wallet and 0.2 Assistant credits.")
      expect(await page.getByTestId("tile-held").allInnerTexts()).toEqual(["$1.50 held", "0.2 held"])
      // The correction, labelled, its time of day with its zone.
      const correction = page.getByTestId("correction")
      expect(await correction.getByText("Correction", { exact: true }).isVisible()).toBe(true)
      expect(await correction.innerText()).toContain("Takes back an earlier use")
      expect(await correction.locator("time").innerText()).toMatch(/^[A-Z][a-z]{2} \d{1,2}, \d{1,2}:\d{2} [AP]M GMT\+9$/)
      // What the chart's "in all" is made of beside the plan's usage charges.
      expect(await visibleText(page, "usage-explained")).toMatch(/^\$[\d.,]+ in all: \$[\d.,]+ of it is charged .* the other \$[\d.,]+ was drawn from allowances/)
      // The chart: bars drawn, its text legible and apart.
      const chart = page.locator("figure.chart svg[role=img]:visible")
      expect(await chart.count()).toBe(1)
      expect(await chart.locator("rect.bar").count()).toBeGreaterThan(5)
      expect((await chart.boundingBox())!.height).toBeGreaterThan(width < 500 ? 150 : 300)
      await expectChartLegible(page, width)
      const invoiceRow = page.getByRole("row").filter({ hasText: world.invoice.number }).last()
      expect(await invoiceRow.textContent()).toContain(usd(world.invoice.total))
      // Dates are rewritten in the browser's time zone (Tokyo), not left in UTC.
      expect(await page.locator("footer time").textContent()).toMatch(/GMT\+9/)
      // Nothing wider than the screen (tables scroll inside their card).
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
      await screenshot(page, "portal", width)
    }
    await docsScreenshot(page, "portal", { width: 1000, height: 1040 })

    await atWidth(page, 1280)
    await page.getByRole("row").filter({ hasText: world.invoice.number }).last().getByRole("link").click()
    await page.waitForURL(/\/pay\//)
    for (const width of widths) {
      await atWidth(page, width)
      await expect.poll(() => page.locator("h1").textContent()).toContain("Plan invoice")
      expect(await page.locator("h1 .badge").allTextContents()).toEqual(["OPEN", "Overdue"])
      expect(await page.getByTestId("invoice-total").textContent()).toBe(usd(world.invoice.total))
      expect(await visibleText(page, "amount-due")).toBe(usd(invoice.amountDue ?? invoice.total))
      expect(await visibleText(page, "due-date")).toMatch(/^Overdue: it was due [A-Z][a-z]{2} \d{1,2}, \d{4}\.$/)
      expect(await page.getByRole("row").filter({ hasText: "VAT (20%)" }).count()).toBe(1)
      expect(await page.locator("tbody tr").count()).toBe(3)
      expect(await page.getByTestId("payment-instructions").textContent()).toBe(PAYMENT_INSTRUCTIONS)
      // The billing contact: the e-mail address and the address, a line each.
      expect((await page.getByTestId("billing-contact").innerText()).split("\n")).toEqual([BILLING_CONTACT.email, ...BILLING_CONTACT.addressLines])
      // The number a person can quote, in the details and in the payment instructions.
      expect(world.invoice.number).toMatch(/^INV-\d{6}$/)
      expect(await page.getByTestId("invoice-number").textContent()).toBe(world.invoice.number)
      expect(await page.getByTestId("quote-number").textContent()).toBe(world.invoice.number)
      expect(await page.title()).toContain(world.invoice.number)
      // Seats, a FLAT unit whose line carries `unitPrice: null`: its unit price shown, in the column on a desktop
      // and under the description on a phone, where the quantity and unit price columns give way.
      const seats = page.getByRole("row").filter({ hasText: "Seats (prepaid)" })
      if (width >= 641) {
        expect(await seats.getByTestId("unit-price").innerText()).toBe("$12.50")
        expect(await seats.getByTestId("line-quantity").isVisible()).toBe(false)
        expect(await page.getByRole("columnheader", { name: "Unit price" }).isVisible()).toBe(true)
      } else {
        expect(await seats.getByTestId("unit-price").isVisible()).toBe(false)
        expect(await seats.getByTestId("line-quantity").innerText()).toBe("3 \u00d7 $12.50")
      }
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
      await screenshot(page, "invoice", width)
    }
    await docsScreenshot(page, "invoice", { width: 375, height: 1160 })
    await page.close()
  })

  it("reaches back a year from the usage chart's ranges, a bar a month", async () => {
    const page = await context.newPage()
    const { url } = await portalTokenOf(world.api, world.customer.id)
    expect((await page.goto(url))?.status()).toBe(200)
    const ranges = page.getByTestId("usage-ranges")
    expect(await ranges.getByRole("link", { name: "This cycle" }).getAttribute("aria-current")).toBe("page")
    await ranges.getByRole("link", { name: "Last 12 months" }).click()
    await page.waitForURL(/usage=12-months/)
    for (const width of widths) {
      await atWidth(page, width)
      await expect.poll(() => page.locator("#usage").textContent()).toBe("Usage, last 12 months")
      expect(await ranges.getByRole("link", { name: "Last 12 months" }).getAttribute("aria-current")).toBe("page")
      const chart = page.locator("figure.chart svg[role=img]:visible")
      expect(await chart.count()).toBe(1)
      expect(await chart.locator("rect.bar[data-month]").count()).toBeGreaterThan(0)
      await expectChartLegible(page, width)
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
      await screenshot(page, "portal-12-months", width)
    }
    // And back to this cycle, by its link.
    await ranges.getByRole("link", { name: "This cycle" }).click()
    await page.waitForURL(/usage=cycle/)
    await expect.poll(() => page.locator("#usage").textContent()).toBe("Usage this cycle")
    await page.close()
  })

  it("says an empty cycle has no usage rather than drawing empty axes", async () => {
    const page = await context.newPage()
    const { url } = await portalTokenOf(world.api, world.neighbour.id)
    expect((await page.goto(url))?.status()).toBe(200)
    for (const width of widths) {
      await atWidth(page, width)
      expect(await visibleText(page, "no-usage")).toBe("No usage to chart in this period yet.")
      expect(await page.locator("figure.chart").count()).toBe(0)
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
      await screenshot(page, "portal-empty", width)
    }
    await page.close()
  })

  it("answers a tampered, expired or edited link with a 4xx page and no one's data", async () => {
    const page = await context.newPage()
    const { token } = await portalTokenOf(world.api, world.customer.id)
    const tamperedPortal = await page.goto(`${world.origin}/portal?token=${encodeURIComponent(tampered(token))}`)
    expect(tamperedPortal?.status()).toBe(401)
    expect(await page.locator("h1").textContent()).toBe("This link is not valid")
    await screenshot(page, "refused", 375)

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
