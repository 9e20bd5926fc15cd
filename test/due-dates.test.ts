/**
 * Due dates and overdue (issue 38, docs/billing.md "Due dates and overdue"):
 * payment terms per organisation and per customer, over HTTP and the CLI; the
 * due date every final invoice is given (issued final, a plan change's
 * PRORATION invoice, a DRAFT finalised at its grace period's end, the
 * upcoming preview); the cycle job marking OPEN invoices past their due date
 * overdue once; the settings refused whole when a value is out of range.
 *
 * The app's clock is a SettableClock, so an invoice is issued at an instant
 * the test names, and every expected due date is a literal worked out by hand
 * (14 days after 2025-03-10T09:30:00.000Z is 2025-03-24T09:30:00.000Z).
 * Instants move forward from test to test: the cycle job serves every
 * organisation of the file's database.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { markOverdue } from "../src/billing/DueDates.ts"
import { type Client, clientOf, expectError, makeCustomer, makePlan, makeUnit, ok, runCycles } from "./billing-support.ts"
import { drain } from "./signals-fixtures.ts"
import { makeSettableClock } from "./support/SettableClock.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

const clock = makeSettableClock()
let app: TestApp

beforeAll(async () => {
  // A database of the file's own: the cycle job marks every organisation's invoices, at instants the tests choose.
  app = await startTestApp({ ownDatabase: true, clock })
})
afterAll(() => app.close())

const at = (iso: string) => clock.set(Date.parse(iso))

const workspace = async (name: string): Promise<{ tenant: Tenant; api: Client; org: ReadonlyArray<string> }> => {
  const tenant = await app.tenant(name)
  return { tenant, api: clientOf(app, tenant), org: ["--org", tenant.organizationId] }
}

const invoicesOf = async (api: Client, customerId: string) => ok(await api.get(`/invoices?customerId=${customerId}`)).invoices

const onlyInvoice = async (api: Client, customerId: string) => {
  const invoices = await invoicesOf(api, customerId)
  expect(invoices).toHaveLength(1)
  return invoices[0]
}

const buy = async (api: Client, customerId: string, planId: string) =>
  ok(await api.post("/purchases", { customerId, planId }), 201).purchase

describe("due dates", () => {
  it("are the moment an invoice becomes final plus the customer's terms, or else the organisation's", async () => {
    const { api, tenant, org } = await workspace("Terms")
    const plan = await makePlan(app, tenant, [{ type: "WALLET", billingMode: "ADVANCE", amount: 10 }])
    const bigger = await makePlan(app, tenant, [{ type: "WALLET", billingMode: "ADVANCE", amount: 40 }])
    // The organisation's terms: 14 days (default 0).
    expect(ok(await api.get("/organization/settings")).organization.paymentTermsDays).toBe(0)
    expect(ok(await api.patch("/organization/settings", { paymentTermsDays: 14 })).organization.paymentTermsDays).toBe(14)

    const ofOrg = await makeCustomer(api)
    expect(ofOrg.paymentTermsDays).toBeNull()
    const dueAtOnce = await makeCustomer(api, { paymentTermsDays: 0 })
    expect(dueAtOnce.paymentTermsDays).toBe(0)
    const thirty = await makeCustomer(api)
    const updated = await app.cli(["customer", "update", thirty.id, "--payment-terms-days", "30", "--json", ...org])
    expect(updated.code, updated.stderr).toBe(0)
    expect(updated.json.customer.paymentTermsDays).toBe(30)

    at("2025-03-10T09:30:00.000Z")
    for (const customer of [ofOrg, dueAtOnce, thirty]) await buy(api, customer.id, plan.id)
    const issued = {
      ofOrg: await onlyInvoice(api, ofOrg.id),
      dueAtOnce: await onlyInvoice(api, dueAtOnce.id),
      thirty: await onlyInvoice(api, thirty.id)
    }
    for (const invoice of Object.values(issued)) {
      expect(invoice).toMatchObject({ kind: "PLAN", status: "OPEN", issuedAt: "2025-03-10T09:30:00.000Z", overdue: false, overdueAt: null })
    }
    expect(issued.ofOrg.dueDate).toBe("2025-03-24T09:30:00.000Z") // 14 days: the organisation's
    expect(issued.dueAtOnce.dueDate).toBe("2025-03-10T09:30:00.000Z") // the customer's 0 overrides
    expect(issued.thirty.dueDate).toBe("2025-04-09T09:30:00.000Z") // 30 days: 21 left in March, 9 in April
    expect(ok(await api.get(`/invoices/${issued.ofOrg.id}`)).invoice.dueDate).toBe("2025-03-24T09:30:00.000Z")

    // The CLI shows the same: --json as the API, the view a DUE column and a due line.
    const listed = await app.cli(["invoice", "list", "--customer", thirty.id, "--json", ...org])
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.json.invoices[0]).toMatchObject({ dueDate: "2025-04-09T09:30:00.000Z", overdue: false, overdueAt: null })
    const table = await app.cli(["invoice", "list", "--customer", thirty.id, ...org])
    expect(table.stdout).toMatch(/\bDUE\b/)
    expect(table.stdout).toContain("2025-04-09")
    const shown = await app.cli(["invoice", "show", issued.thirty.id, ...org])
    expect(shown.stdout).toMatch(/due\s+2025-04-09T09:30:00\.000Z/)

    // Terms changed later apply to invoices finalised from then on: a plan change NOW three days in
    // issues a PRORATION invoice due 14 days after the change (the answer and the stored invoice agree).
    at("2025-03-13T12:00:00.000Z")
    const purchase = ok(await api.get(`/purchases?customerId=${ofOrg.id}`)).purchases[0]
    const changed = ok(await api.post(`/purchases/${purchase.id}/change`, { planId: bigger.id, when: "NOW" }))
    expect(changed.invoice).toMatchObject({ kind: "PRORATION", issuedAt: "2025-03-13T12:00:00.000Z", dueDate: "2025-03-27T12:00:00.000Z" })
    expect(ok(await api.get(`/invoices/${changed.invoice.id}`)).invoice.dueDate).toBe("2025-03-27T12:00:00.000Z")
    // The first invoice keeps the due date it was given.
    expect(ok(await api.get(`/invoices/${issued.ofOrg.id}`)).invoice.dueDate).toBe("2025-03-24T09:30:00.000Z")

    // The upcoming preview: the next PLAN invoice, issued at the cycle's end, due 30 days later.
    const upcoming = ok(await api.get(`/invoices/upcoming?customerId=${thirty.id}`)).invoices
    expect(upcoming.map((invoice: any) => [invoice.kind, invoice.issuedAt, invoice.dueDate])).toEqual([
      ["PLAN", "2025-04-10T09:30:00.000Z", "2025-05-10T09:30:00.000Z"]
    ])
  })

  it("a DRAFT has none; finalised at its grace period's end, it is due from that moment", async () => {
    const { api, tenant } = await workspace("Draft terms")
    ok(await api.patch("/organization/settings", { invoiceGraceHours: 24, paymentTermsDays: 7 }))
    const unit = await makeUnit(api, { flatPrice: 2 })
    const plan = await makePlan(app, tenant, [
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id },
      { type: "WALLET", billingMode: "ADVANCE", amount: 5 }
    ])
    const customer = await makeCustomer(api)
    at("2025-05-01T00:00:00.000Z")
    await buy(api, customer.id, plan.id)
    at("2025-05-02T08:00:00.000Z")
    ok(await api.post("/signal/unit", { customerId: customer.id, agentKey: unit.agentKey, quantity: 3, timestamp: "2025-05-02T08:00:00.000Z" }), 202)
    await drain(app)
    // The cycle ends 2025-06-01: its USAGE invoice is a DRAFT for 24 hours, with no due date.
    at("2025-06-01T00:00:00.000Z")
    await runCycles(app, new Date("2025-06-01T00:00:00.000Z"))
    const draft = (await invoicesOf(api, customer.id)).find((invoice: any) => invoice.kind === "USAGE")
    expect(draft).toMatchObject({ status: "DRAFT", total: 6, dueDate: null, overdue: false, overdueAt: null })
    // The job runs after the grace period ends (2025-06-02T00:00Z): the moment it finalises the draft
    // plus 7 days is the due date.
    at("2025-06-02T03:15:00.000Z")
    await runCycles(app, new Date("2025-06-02T03:15:00.000Z"))
    const finalised = ok(await api.get(`/invoices/${draft.id}`)).invoice
    expect(finalised).toMatchObject({ status: "OPEN", dueDate: "2025-06-09T03:15:00.000Z", overdue: false })
    // The PLAN invoice of the new cycle was issued final at the cycle's start: due 7 days after it.
    const plans = (await invoicesOf(api, customer.id)).filter((invoice: any) => invoice.kind === "PLAN")
    expect(plans.map((invoice: any) => invoice.dueDate).sort()).toEqual(["2025-05-08T00:00:00.000Z", "2025-06-08T00:00:00.000Z"])
  })
})

describe("overdue", () => {
  it("the cycle job marks an OPEN invoice past its due date overdue once; one paid before is never", async () => {
    const { api, tenant, org } = await workspace("Overdue")
    ok(await api.patch("/organization/settings", { paymentTermsDays: 14 }))
    const plan = await makePlan(app, tenant, [{ type: "WALLET", billingMode: "ADVANCE", amount: 10 }])
    const late = await makeCustomer(api)
    const prompt = await makeCustomer(api)
    const voided = await makeCustomer(api)
    at("2025-07-01T10:00:00.000Z")
    for (const customer of [late, prompt, voided]) await buy(api, customer.id, plan.id)
    const unpaid = await onlyInvoice(api, late.id)
    const paidEarly = await onlyInvoice(api, prompt.id)
    const toVoid = await onlyInvoice(api, voided.id)
    expect(unpaid.dueDate).toBe("2025-07-15T10:00:00.000Z")

    at("2025-07-02T10:00:00.000Z")
    ok(await api.post(`/invoices/${paidEarly.id}/payments`, { reference: "bank 1" }), 201)

    // At the due date itself nothing is overdue yet: an invoice is overdue once its due date has passed.
    await runCycles(app, new Date("2025-07-15T10:00:00.000Z"))
    expect(ok(await api.get(`/invoices/${unpaid.id}`)).invoice).toMatchObject({ status: "OPEN", overdue: false, overdueAt: null })

    // A millisecond later it is, marked by that run.
    await runCycles(app, new Date("2025-07-15T10:00:00.001Z"))
    const marked = ok(await api.get(`/invoices/${unpaid.id}`)).invoice
    expect(marked).toMatchObject({ status: "OPEN", overdue: true, overdueAt: "2025-07-15T10:00:00.001Z", dueDate: "2025-07-15T10:00:00.000Z" })
    expect(ok(await api.get(`/invoices/${toVoid.id}`)).invoice).toMatchObject({ overdue: true, overdueAt: "2025-07-15T10:00:00.001Z" })
    // Paid before its due date: never overdue.
    expect(ok(await api.get(`/invoices/${paidEarly.id}`)).invoice).toMatchObject({
      status: "PAID",
      dueDate: "2025-07-15T10:00:00.000Z",
      overdue: false,
      overdueAt: null
    })

    // Run again (the library and the CLI's `cycle run`): still marked once, at the first run's instant.
    await runCycles(app, new Date("2025-07-20T00:00:00.000Z"))
    const again = await app.cli(["cycle", "run", "--now", "2025-07-21T00:00:00.000Z", "--json"])
    expect(again.code, again.stderr).toBe(0)
    expect(ok(await api.get(`/invoices/${unpaid.id}`)).invoice.overdueAt).toBe("2025-07-15T10:00:00.001Z")
    const shown = await app.cli(["invoice", "show", unpaid.id, ...org])
    expect(shown.stdout).toMatch(/due\s+2025-07-15T10:00:00\.000Z \(OVERDUE since 2025-07-15T10:00:00\.001Z\)/)
    const listed = await app.cli(["invoice", "list", "--customer", late.id, ...org])
    expect(listed.stdout).toMatch(/OPEN\s+10\s+2025-07-15 overdue/)

    // Paid late, or voided: no longer overdue, and the mark stays to show it was.
    at("2025-07-22T00:00:00.000Z")
    const paid = ok(await api.post(`/invoices/${unpaid.id}/payments`, {}), 201).invoice
    expect(paid).toMatchObject({ status: "PAID", overdue: false, overdueAt: "2025-07-15T10:00:00.001Z", dueDate: "2025-07-15T10:00:00.000Z" })
    const voidedInvoice = await app.cli(["invoice", "void", toVoid.id, "--json", ...org])
    expect(voidedInvoice.code, voidedInvoice.stderr).toBe(0)
    expect(voidedInvoice.json.invoice).toMatchObject({ status: "VOID", overdue: false, overdueAt: "2025-07-15T10:00:00.001Z" })
  })

  it("two runs at once mark each invoice once, in batches", async () => {
    const { api, tenant } = await workspace("Overdue together")
    const plan = await makePlan(app, tenant, [{ type: "WALLET", billingMode: "ADVANCE", amount: 3 }])
    at("2025-08-01T00:00:00.000Z")
    const ids: Array<string> = []
    for (let i = 0; i < 7; i++) {
      const customer = await makeCustomer(api)
      await buy(api, customer.id, plan.id)
      ids.push((await onlyInvoice(api, customer.id)).id)
    }
    // Terms 0: due at issue, overdue from the next instant. Two runs side by side, batches of two, each to the end.
    const now = new Date("2025-08-01T00:00:01.000Z")
    const drainOverdue = Effect.gen(function*() {
      const mine: Array<string> = []
      for (;;) {
        const marked = yield* markOverdue(now, 2)
        if (marked.length === 0) return mine
        mine.push(...marked.map((invoice) => invoice.id))
      }
    })
    const [first, second] = await app.run(Effect.all([drainOverdue, drainOverdue], { concurrency: 2 }))
    const ours = [...first!, ...second!].filter((id) => ids.includes(id))
    expect(ours.sort()).toEqual([...ids].sort())
    for (const id of ids) {
      expect(ok(await api.get(`/invoices/${id}`)).invoice).toMatchObject({ overdue: true, overdueAt: "2025-08-01T00:00:01.000Z" })
    }
    expect(await app.run(markOverdue(new Date("2025-08-02T00:00:00.000Z")))).toEqual([])
  })
})

describe("settings", () => {
  it("the organisation's terms and billing contact: read and changed over HTTP and the CLI", async () => {
    const { api, org } = await workspace("Contact")
    expect(ok(await api.get("/organization/settings")).organization).toMatchObject({
      paymentTermsDays: 0,
      billingContact: { email: null, addressLines: [] }
    })
    const changed = ok(await api.patch("/organization/settings", {
      paymentTermsDays: 30,
      billingContact: { email: "billing@integrator.example", addressLines: ["Integrator Co", "1 Main Street", "10115 Berlin"] }
    }))
    expect(changed).toMatchObject({
      updated: true,
      organization: {
        paymentTermsDays: 30,
        billingContact: { email: "billing@integrator.example", addressLines: ["Integrator Co", "1 Main Street", "10115 Berlin"] }
      }
    })
    // A part left out stays; null clears it.
    const cleared = ok(await api.patch("/organization/settings", { billingContact: { email: null } })).organization
    expect(cleared.billingContact).toEqual({ email: null, addressLines: ["Integrator Co", "1 Main Street", "10115 Berlin"] })
    expect(ok(await api.patch("/organization/settings", { billingContact: { addressLines: [] } })).organization.billingContact)
      .toEqual({ email: null, addressLines: [] })

    const set = await app.cli([
      "org", "settings", "--payment-terms-days", "45", "--billing-email", "ar@integrator.example",
      "--billing-address", "Integrator Co", "--billing-address", "PO Box 7", "--json", ...org
    ])
    expect(set.code, set.stderr).toBe(0)
    expect(set.json.organization).toMatchObject({
      paymentTermsDays: 45,
      billingContact: { email: "ar@integrator.example", addressLines: ["Integrator Co", "PO Box 7"] }
    })
    const view = await app.cli(["org", "settings", ...org])
    expect(view.stdout).toMatch(/payment terms\s+45 day\(s\)/)
    expect(view.stdout).toMatch(/billing contact\s+ar@integrator\.example, Integrator Co, PO Box 7/)
    expect(ok(await api.get("/organization/settings")).organization).toMatchObject({
      paymentTermsDays: 45,
      billingContact: { email: "ar@integrator.example", addressLines: ["Integrator Co", "PO Box 7"] }
    })
    const clearedByCli = await app.cli(["org", "settings", "--billing-address", "", "--billing-email", "", "--json", ...org])
    expect(clearedByCli.json.organization.billingContact).toEqual({ email: null, addressLines: [] })
  })

  it("out-of-range terms and a malformed contact are 400 validation_failed, and nothing is written", async () => {
    const { api, org } = await workspace("Refusals")
    ok(await api.patch("/organization/settings", { paymentTermsDays: 10, billingContact: { email: "a@b.example" } }))
    const before = ok(await api.get("/organization/settings")).organization
    for (const body of [
      { paymentTermsDays: -1 },
      { paymentTermsDays: 366 },
      { paymentTermsDays: 1e9 },
      { paymentTermsDays: 2.5 },
      { paymentTermsDays: "14" },
      { paymentTermsDays: null },
      { name: "Renamed", paymentTermsDays: -5 },
      { billingContact: { email: "not an address" } },
      { billingContact: { addressLines: ["one", "two\nthree"] } },
      { billingContact: { addressLines: ["   "] } },
      { billingContact: { addressLines: Array.from({ length: 9 }, (_, i) => `line ${i}`) } },
      { billingContact: { addressLines: ["x".repeat(121)] } },
      { billingContact: { phone: "+49 30 1234" } },
      { name: "Renamed", billingContact: { email: "x@y.example", addressLines: "Integrator Co" } }
    ]) {
      expectError(await api.patch("/organization/settings", body), 400, "validation_failed")
    }
    expect(ok(await api.get("/organization/settings")).organization).toEqual(before)

    for (const flags of [
      ["--payment-terms-days=-1"],
      ["--payment-terms-days", "366"],
      ["--payment-terms-days", "fourteen"],
      ["--name", "Renamed", "--payment-terms-days", "2.5"],
      ["--billing-email", "nobody"],
      ["--name", "Renamed", "--billing-address", "x".repeat(121)]
    ]) {
      const refused = await app.cli(["org", "settings", ...flags, ...org])
      expect(refused.code, `${flags.join(" ")}: ${refused.stdout}`).toBe(2)
      expect(refused.stderr).toMatch(/--payment-terms-days|--billing-email|--billing-address/)
    }
    expect(ok(await api.get("/organization/settings")).organization).toEqual(before)
  })

  it("a customer's terms: optional on create and update, null for the organisation's, refused out of range", async () => {
    const { api, org } = await workspace("Customer terms")
    const customer = await makeCustomer(api)
    const count = async () => ok(await api.get("/customers")).customers.length
    const customers = await count()
    for (const paymentTermsDays of [-3, 366, 7.5, "7"]) {
      expectError(
        await api.post("/customers", { name: "Refused", email: "refused@example.com", paymentTermsDays }),
        400,
        "validation_failed"
      )
      expectError(await api.patch(`/customers/${customer.id}`, { name: "Renamed", paymentTermsDays }), 400, "validation_failed")
    }
    expect(await count()).toBe(customers)
    expect(ok(await api.get(`/customers/${customer.id}`)).customer).toMatchObject({ name: customer.name, paymentTermsDays: null })

    expect(ok(await api.patch(`/customers/${customer.id}`, { paymentTermsDays: 60 })).customer.paymentTermsDays).toBe(60)
    // A PATCH without it leaves it; null puts the customer back on the organisation's terms.
    expect(ok(await api.patch(`/customers/${customer.id}`, { phone: "+49 30 1" })).customer.paymentTermsDays).toBe(60)
    expect(ok(await api.patch(`/customers/${customer.id}`, { paymentTermsDays: null })).customer.paymentTermsDays).toBeNull()

    const created = await app.cli(["customer", "create", "--name", "By CLI", "--email", "cli@example.com", "--payment-terms-days", "21", "--json", ...org])
    expect(created.code, created.stderr).toBe(0)
    expect(created.json.customer.paymentTermsDays).toBe(21)
    const shown = await app.cli(["customer", "get", created.json.customer.id, ...org])
    expect(shown.stdout).toMatch(/payment terms\s+21 day\(s\)/)
    for (const value of ["-1", "400", "abc", "1.5"]) {
      const refused = await app.cli(["customer", "update", created.json.customer.id, `--payment-terms-days=${value}`, ...org])
      expect(refused.code, `${value}: ${refused.stdout}`).toBe(2)
      expect(refused.stderr).toMatch(/payment-terms-days|paymentTermsDays/)
    }
    const reset = await app.cli(["customer", "update", created.json.customer.id, "--payment-terms-days", "default", "--json", ...org])
    expect(reset.json.customer.paymentTermsDays).toBeNull()
  })
})
