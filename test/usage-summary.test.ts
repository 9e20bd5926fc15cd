/**
 * Usage summaries (issue 37 point 3, docs/signals.md "Usage summaries"):
 * `GET /usage/summary` and `billing usage summary`, on both databases. The
 * usage is priced by the worker from real signals (each with its own
 * `timestamp`, so it lands where the test wants it in time), one of them
 * reversed through the API; every sum is checked against decimals worked out
 * by hand, the windows against UTC hour, day and month starts, and every
 * refusal against its status and code.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { buy, makePlan } from "./billing-support.ts"
import { client, drain as drainIn, expectError, gpt4oBundle, query } from "./signals-fixtures.ts"
import { clientOf } from "./support/Http.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
let globex: Tenant

const HOUR = 3_600_000
const DAY = 24 * HOUR
const now = new Date()
/** Yesterday 10:00 UTC: when customer A's usage happened. */
const yesterday = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - 1)
const usageAt = new Date(yesterday + 10 * HOUR)
/** The first instant of this UTC month: customer C's usage sits on each side of it. */
const monthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)
const iso = (ms: number) => new Date(ms).toISOString()

/** The ids of what the tests share. */
const ids: Record<string, string> = {}

/** A customer of `tenant` on its plan whose purchase started 40 days ago, so that usage of last month is in its cycle. */
const customerOf = async (tenant: Tenant, extra: Record<string, unknown> = {}) => {
  const api = client(app, tenant)
  const customerId = await api.created("/customers", { name: "Jo", email: `jo-${Math.random()}@example.com`, ...extra }, "customer")
  const purchase = await buy(clientOf(app, tenant), customerId, ids[`plan:${tenant.organizationId}`]!)
  await query(
    app,
    `UPDATE purchases SET period_start = now() - interval '40 days', period_end = now() + interval '20 days'
     WHERE organization_id = $1 AND id = $2`,
    [tenant.organizationId, purchase.id]
  )
  return customerId
}

/** A signal of `tenant`, queued (202); its rawId. */
const send = async (tenant: Tenant, path: string, body: Record<string, unknown>) => {
  const response = await client(app, tenant).post(path, body)
  expect(response.status, JSON.stringify(response.body)).toBe(202)
  return response.body.result.rawId as string
}

const credit = (customerId: string, at: Date | number, inputTokens: number, outputTokens: number, extra: Record<string, unknown> = {}) => ({
  customerId,
  agentKey: "chat",
  usage: { model: "gpt-4o", inputTokens, outputTokens },
  timestamp: new Date(at).toISOString(),
  ...extra
})

/** The usage row a signal produced. */
const rowOf = async (tenant: Tenant, rawId: string) =>
  (await query<{ id: string }>(app, "SELECT id FROM usage_log WHERE organization_id = $1 AND signal_id = $2", [
    tenant.organizationId,
    rawId
  ]))[0]!.id

const summary = (params: Record<string, string>, tenant: Tenant = acme) =>
  client(app, tenant).get(`/usage/summary?${new URLSearchParams(params)}`)

const rowsOf = async (params: Record<string, string>, tenant: Tenant = acme) => {
  const response = await summary(params, tenant)
  expect(response.status, JSON.stringify(response.body)).toBe(200)
  expect(response.body.statusDetail).toEqual({ status: "SUCCESS", message: "Usage summary" })
  return response.body.result.rows as Array<Record<string, unknown>>
}

/** Customer A's day: yesterday, UTC. */
const dayOfA = () => ({ customerId: ids.a!, from: iso(yesterday), to: iso(yesterday + DAY), window: "DAY" })
const windowOfA = { windowStart: iso(yesterday), windowEnd: iso(yesterday + DAY) }

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Summaries")
  globex = await app.tenant("Globex")
  for (const tenant of [acme, globex]) {
    const api = client(app, tenant)
    // gpt-4o at 2.5 and 10 USD per million tokens, margin 20 %: basePrice 0.00625 USD a credit.
    const chat = await api.created("/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: gpt4oBundle }, "credit")
    const pages = await api.created("/units", { name: "Pages", agentKey: "pages", pricingType: "FLAT", flatPrice: 0.5 }, "unit")
    ids[`plan:${tenant.organizationId}`] = (await makePlan(app, tenant, [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: chat, quantity: 1000 },
      { type: "UNIT", billingMode: "ARREAR", unitId: pages }
    ])).id
  }

  // Customer A, yesterday at 10:00: four uses, the first of them reversed.
  ids.a = await customerOf(acme, { externalId: "summary-a" })
  const member = await client(app, acme).post(`/customers/${ids.a}/members`, { email: "Ann@Example.com" })
  expect(member.status, JSON.stringify(member.body)).toBe(201)
  // 1,000 in, 500 out: provider 0.0075, customer 0.009, 1.2 credits.
  const first = await send(acme, "/signal/credit", credit(ids.a, usageAt, 1000, 500))
  // 1,234 in, 567 out: provider 0.003085 + 0.00567 = 0.008755, customer 0.010506, 1.4008 credits.
  await send(acme, "/signal/credit", credit(ids.a, usageAt, 1234, 567, {
    member: "ANN@example.com",
    custom: { team: "research", order_id: 7, user: { team: "x" } }
  }))
  // 1 in, 1 out: provider 0.0000025 + 0.00001 = 0.0000125, customer 0.000015, 0.002 credits.
  await send(acme, "/signal/credit", credit(ids.a, usageAt, 1, 1, { member: "ann@example.com", custom: { team: "research" } }))
  // 3 pages at 0.5: customer 1.5, provider 0.
  await send(acme, "/signal/unit", {
    customerId: ids.a,
    agentKey: "pages",
    quantity: 3,
    timestamp: usageAt.toISOString(),
    custom: { team: "ops" }
  })

  // Customer C: one use on each side of this month's first instant, the last millisecond of last month first.
  ids.c = await customerOf(acme)
  await send(acme, "/signal/credit", credit(ids.c, monthStart - 1, 1000, 500))
  await send(acme, "/signal/credit", credit(ids.c, monthStart, 1000, 500))

  // Globex's customer G: the same uses as A's at the same moment, never counted in Acme's sums.
  ids.g = await customerOf(globex, { externalId: "summary-g" })
  await send(globex, "/signal/credit", credit(ids.g, usageAt, 1000, 500))
  await send(globex, "/signal/credit", credit(ids.g, usageAt, 1000, 500))

  await drainIn(app)
  const reversed = await client(app, acme).post(`/signal/usage-log/${await rowOf(acme, first)}/reverse`, { reason: "sent twice" })
  expect(reversed.status, JSON.stringify(reversed.body)).toBe(200)
})
afterAll(() => app?.close())

describe("GET /usage/summary: exact sums", () => {
  it("adds a customer's day up exactly, its reversal included", async () => {
    // Quantities 1.2 + 1.4008 + 0.002 + 3 - 1.2; costs 0.009 + 0.010506 + 0.000015 + 1.5 - 0.009;
    // provider costs 0.0075 + 0.008755 + 0.0000125 + 0 - 0.0075; five rows, one a reversal and one reversed.
    expect(await rowsOf(dayOfA())).toEqual([
      { ...windowOfA, quantity: 4.4028, cost: 1.510521, providerCost: 0.0087675, count: 3 }
    ])
  })

  it("answers the same by externalId, and the exact digits on the wire", async () => {
    const { customerId: _, ...range } = dayOfA()
    const response = await app.request("GET", `/usage/summary?${new URLSearchParams({ ...range, externalId: "summary-a" })}`, {
      key: acme.apiKey
    })
    expect(response.status).toBe(200)
    expect(response.body.result.rows).toEqual([{ ...windowOfA, quantity: 4.4028, cost: 1.510521, providerCost: 0.0087675, count: 3 }])
    // Not a float's 1.5105209999999999 or 0.008767500000000001: the NUMERIC sums as they are.
    const text = await (await fetch(`${app.baseUrl}/usage/summary?${new URLSearchParams({ ...range, externalId: "summary-a" })}`, {
      headers: { authorization: `Bearer ${acme.apiKey}` }
    })).text()
    expect(text).toContain(`"quantity":4.4028,"cost":1.510521,"providerCost":0.0087675,"count":3`)
  })
})

describe("GET /usage/summary: groupBy", () => {
  it("groups by agentKey, in byte order", async () => {
    expect(await rowsOf({ ...dayOfA(), groupBy: "agentKey" })).toEqual([
      { ...windowOfA, agentKey: "chat", quantity: 1.4028, cost: 0.010521, providerCost: 0.0087675, count: 2 },
      { ...windowOfA, agentKey: "pages", quantity: 3, cost: 1.5, providerCost: 0, count: 1 }
    ])
  })

  it("groups by member in lower case, usage of no member last", async () => {
    expect(await rowsOf({ ...dayOfA(), groupBy: "member" })).toEqual([
      { ...windowOfA, member: "ann@example.com", quantity: 1.4028, cost: 0.010521, providerCost: 0.0087675, count: 2 },
      // The reversed use and its reversal cancel out: 3 pages and nothing else.
      { ...windowOfA, member: null, quantity: 3, cost: 1.5, providerCost: 0, count: 1 }
    ])
  })

  it("groups by model then meter, in the order asked", async () => {
    expect(await rowsOf({ ...dayOfA(), groupBy: "model,meter" })).toEqual([
      { ...windowOfA, model: "gpt-4o", meter: "CREDIT", quantity: 1.4028, cost: 0.010521, providerCost: 0.0087675, count: 2 },
      { ...windowOfA, model: null, meter: "UNIT", quantity: 3, cost: 1.5, providerCost: 0, count: 1 }
    ])
  })

  it("groups by a custom field, its key as sent, and by a path into custom", async () => {
    expect(await rowsOf({ ...dayOfA(), groupBy: "custom.team" })).toEqual([
      { ...windowOfA, custom: { team: "ops" }, quantity: 3, cost: 1.5, providerCost: 0, count: 1 },
      { ...windowOfA, custom: { team: "research" }, quantity: 1.4028, cost: 0.010521, providerCost: 0.0087675, count: 2 },
      // A row and its reversal, both without custom: they hold rows, which add up to nothing.
      { ...windowOfA, custom: { team: null }, quantity: 0, cost: 0, providerCost: 0, count: 0 }
    ])
    // A key with an underscore comes back as sent (the SQL client camelCases the JSON it reads) and keeps its type.
    expect(await rowsOf({ ...dayOfA(), groupBy: "custom.order_id, custom.user.team" })).toEqual([
      { ...windowOfA, custom: { order_id: 7, "user.team": "x" }, quantity: 1.4008, cost: 0.010506, providerCost: 0.008755, count: 1 },
      { ...windowOfA, custom: { order_id: null, "user.team": null }, quantity: 3.002, cost: 1.500015, providerCost: 0.0000125, count: 2 }
    ])
    // The usage log shows the custom the summary groups by.
    const log = (await client(app, acme).get(`/signal/usage-log?customerId=${ids.a}`)).body.result.usageLogs
    expect(log.map((row: any) => row.custom)).toContainEqual({ team: "research", order_id: 7, user: { team: "x" } })
  })

  it("groups by agentKey and a custom field together", async () => {
    expect(await rowsOf({ ...dayOfA(), groupBy: "agentKey,custom.team" })).toEqual([
      { ...windowOfA, agentKey: "chat", custom: { team: "research" }, quantity: 1.4028, cost: 0.010521, providerCost: 0.0087675, count: 2 },
      { ...windowOfA, agentKey: "chat", custom: { team: null }, quantity: 0, cost: 0, providerCost: 0, count: 0 },
      { ...windowOfA, agentKey: "pages", custom: { team: "ops" }, quantity: 3, cost: 1.5, providerCost: 0, count: 1 }
    ])
  })
})

describe("GET /usage/summary: UTC windows", () => {
  const one = { quantity: 1.2, cost: 0.009, providerCost: 0.0075, count: 1 }

  it("puts the month's last millisecond and its first instant in two hours, days and months", async () => {
    const c = { customerId: ids.c! }
    expect(await rowsOf({ ...c, from: iso(monthStart - 30 * 60_000), to: iso(monthStart + 30 * 60_000), window: "HOUR" })).toEqual([
      // Windows cut to the range at both ends.
      { windowStart: iso(monthStart - 30 * 60_000), windowEnd: iso(monthStart), ...one },
      { windowStart: iso(monthStart), windowEnd: iso(monthStart + 30 * 60_000), ...one }
    ])
    expect(await rowsOf({ ...c, from: iso(monthStart - 2 * DAY), to: iso(monthStart + 2 * DAY), window: "DAY" })).toEqual([
      { windowStart: iso(monthStart - DAY), windowEnd: iso(monthStart), ...one },
      { windowStart: iso(monthStart), windowEnd: iso(monthStart + DAY), ...one }
    ])
    const before = new Date(monthStart - 1)
    const previousMonth = Date.UTC(before.getUTCFullYear(), before.getUTCMonth(), 1)
    const nextMonth = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)
    expect(await rowsOf({ ...c, from: iso(previousMonth), to: iso(nextMonth), window: "MONTH", groupBy: "meter" })).toEqual([
      { windowStart: iso(previousMonth), windowEnd: iso(monthStart), meter: "CREDIT", ...one },
      { windowStart: iso(monthStart), windowEnd: iso(nextMonth), meter: "CREDIT", ...one }
    ])
  })

  it("takes from as inclusive and to as exclusive", async () => {
    const c = { customerId: ids.c!, window: "HOUR" }
    expect(await rowsOf({ ...c, from: iso(monthStart - HOUR), to: iso(monthStart) })).toEqual([
      { windowStart: iso(monthStart - HOUR), windowEnd: iso(monthStart), ...one }
    ])
    expect(await rowsOf({ ...c, from: iso(monthStart), to: iso(monthStart + HOUR) })).toEqual([
      { windowStart: iso(monthStart), windowEnd: iso(monthStart + HOUR), ...one }
    ])
    expect(await rowsOf({ ...c, from: iso(monthStart - HOUR), to: iso(monthStart - 1) })).toEqual([])
  })
})

describe("GET /usage/summary: the organisation", () => {
  it("sums every customer of the organisation and none of another's", async () => {
    const range = { from: iso(yesterday), to: iso(yesterday + DAY), window: "DAY" }
    const mine = await rowsOf({ ...range, groupBy: "agentKey" })
    // A's day (C's usage is on a month's first instant, which is yesterday's only when today is the 1st).
    const cYesterday = monthStart - 1 >= yesterday && monthStart - 1 < yesterday + DAY
    const cToday = monthStart >= yesterday && monthStart < yesterday + DAY
    const cRows = (cYesterday ? 1 : 0) + (cToday ? 1 : 0)
    expect(mine).toEqual([
      {
        ...windowOfA,
        agentKey: "chat",
        quantity: 1.4028 + 1.2 * cRows,
        cost: Number((0.010521 + 0.009 * cRows).toFixed(6)),
        providerCost: Number((0.0087675 + 0.0075 * cRows).toFixed(7)),
        count: 2 + cRows
      },
      { ...windowOfA, agentKey: "pages", quantity: 3, cost: 1.5, providerCost: 0, count: 1 }
    ])
    expect(await rowsOf({ ...range, groupBy: "customerId" }, globex)).toEqual([
      { ...windowOfA, customerId: ids.g, quantity: 2.4, cost: 0.018, providerCost: 0.015, count: 2 }
    ])
    // Another organisation's customer is not found, by id or by externalId.
    expectError(await summary({ ...range, customerId: ids.g! }), 404, "customer_not_found")
    expectError(await summary({ ...range, externalId: "summary-g" }), 404, "customer_not_found")
  })
})

describe("GET /usage/summary: refusals, which write nothing", () => {
  const range = () => ({ customerId: ids.a!, from: iso(yesterday), to: iso(yesterday + DAY), window: "DAY" })
  const refused = async (params: Record<string, string>, status: number, code: Parameters<typeof expectError>[2], text: string) => {
    const response = await summary(params)
    expectError(response, status, code)
    expect(response.body.statusDetail.message).toContain(text)
  }

  it("refuses a range that is empty or too long for its window", async () => {
    const rows = await query(app, "SELECT count(*)::int AS n FROM usage_log")
    await refused({ ...range(), to: iso(yesterday) }, 400, "invalid_time_range", "from must be before to")
    await refused({ ...range(), from: iso(yesterday + 1), to: iso(yesterday) }, 400, "invalid_time_range", "from must be before to")
    await refused({ ...range(), to: iso(yesterday + 31 * DAY + 1), window: "HOUR" }, 400, "summary_too_large", "at most 744")
    // 31 days of hours is allowed.
    expect(await rowsOf({ ...range(), to: iso(yesterday + 31 * DAY), window: "HOUR" })).toHaveLength(1)
    await refused({ ...range(), to: iso(yesterday + 366 * DAY + 1) }, 400, "summary_too_large", "at most 366")
    expect(await query(app, "SELECT count(*)::int AS n FROM usage_log")).toEqual(rows)
  })

  it("refuses a window or groupBy it does not know, and both customer references", async () => {
    await refused({ ...range(), window: "WEEK" }, 400, "validation_failed", "window")
    const { window: _, ...noWindow } = range()
    await refused(noWindow, 400, "validation_failed", "window")
    await refused({ ...range(), from: "yesterday" }, 400, "validation_failed", "from")
    await refused({ ...range(), groupBy: "agentKey,bogus" }, 400, "validation_failed", `unknown field "bogus"`)
    await refused({ ...range(), groupBy: "agentKey,agentKey" }, 400, "validation_failed", "a field named twice")
    await refused({ ...range(), groupBy: "custom." }, 400, "validation_failed", `"custom." is not a custom field`)
    await refused({ ...range(), groupBy: "custom.a.b.c.d" }, 400, "validation_failed", "more than 3 keys")
    await refused({ ...range(), groupBy: "agentKey,meter,member,model,customerId,custom.team" }, 400, "validation_failed", "more than 5 fields")
    await refused({ ...range(), externalId: "summary-a" }, 400, "validation_failed", "not both")
    await refused({ ...range(), bogus: "1" }, 400, "validation_failed", `unknown query parameter "bogus"`)
    // One groupBy parameter holding a list, not the parameter repeated.
    const repeated = await client(app, acme).get(`/usage/summary?${new URLSearchParams(range())}&groupBy=agentKey&groupBy=model`)
    expectError(repeated, 400, "validation_failed")
  })

  it("refuses an answer of more than 10,000 rows, and sums them all in fewer", async () => {
    // 10,001 uses with as many distinct custom values, written straight into the log (pricing that many signals
    // would prove nothing more here): one group each.
    const crowd = await customerOf(acme)
    await query(
      app,
      `INSERT INTO usage_log (organization_id, id, customer_id, meter, agent_key, quantity, provider_cost, customer_cost,
                              signal_id, message_id, custom, occurred_at)
       SELECT $1, 'usg_crowd' || n, $2, 'UNIT', 'pages', 1, 0, 0.5, 'sig_crowd' || n, 'msg_crowd' || n,
              jsonb_build_object('n', n), $3::timestamptz
       FROM generate_series(1, 10001) n`,
      [acme.organizationId, crowd, usageAt.toISOString()]
    )
    const range = { customerId: crowd, from: iso(yesterday), to: iso(yesterday + DAY), window: "DAY" }
    await refused({ ...range, groupBy: "custom.n" }, 400, "summary_too_large", "more than 10,000 rows")
    expect(await rowsOf(range)).toEqual([{ ...windowOfA, quantity: 10001, cost: 5000.5, providerCost: 0, count: 10001 }])
  })

  it("answers 404 for an unknown customer and 400 for a malformed externalId", async () => {
    const { customerId: _, ...rest } = range()
    await refused({ ...rest, customerId: "cus_unknown" }, 404, "customer_not_found", "cus_unknown")
    await refused({ ...rest, externalId: "nobody" }, 404, "customer_not_found", "nobody")
    await refused({ ...rest, externalId: "not an id!" }, 400, "validation_failed", "externalId")
  })
})

describe("billing usage summary", () => {
  it("prints the API's rows with --json, and a table", async () => {
    const flags = ["--from", iso(yesterday), "--to", iso(yesterday + DAY), "--window", "day", "--group-by", "agentKey"]
    const json = await app.cli(["usage", "summary", "--customer", ids.a!, ...flags, "--json", "--org", acme.organizationId])
    expect(json.code, json.stderr).toBe(0)
    expect(json.json).toEqual({ rows: await rowsOf({ ...dayOfA(), groupBy: "agentKey" }) })

    const byExternalId = await app.cli(["usage", "--org", acme.organizationId, "summary", "--external-id", "summary-a", ...flags, "--json"])
    expect(byExternalId.code, byExternalId.stderr).toBe(0)
    expect(byExternalId.json).toEqual(json.json)

    const table = await app.cli(["usage", "summary", "--customer", ids.a!, ...flags, "--group-by", "custom.team", "--org", acme.organizationId])
    expect(table.code, table.stderr).toBe(0)
    expect(table.stdout).toMatch(/WINDOW START\s+WINDOW END\s+custom\.team\s+QUANTITY\s+COST\s+PROVIDER COST\s+COUNT/)
    expect(table.stdout).toContain("research")
    expect(table.stdout).toContain("0.010521")
    expect(table.stdout).toContain("3 row(s)")

    // The organisation's, by customer.
    const org = await app.cli(["usage", "summary", ...flags.slice(0, 6), "--group-by", "customerId", "--json", "--org", acme.organizationId])
    expect(org.code, org.stderr).toBe(0)
    expect(org.json.rows.map((row: any) => row.customerId)).toContain(ids.a)
  })

  it("refuses what the API refuses, with the flag named", async () => {
    const base = ["usage", "summary", "--customer", ids.a!, "--from", iso(yesterday), "--to", iso(yesterday + DAY), "--org", acme.organizationId]
    const week = await app.cli([...base, "--window", "week"])
    expect(week.code).toBe(2)
    expect(week.stderr).toContain("--window")
    const missing = await app.cli(["usage", "summary", "--customer", ids.a!, "--window", "DAY", "--org", acme.organizationId])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain("--from")
    const unknown = await app.cli([...base.slice(0, 2), "--customer", "cus_unknown", ...base.slice(4), "--window", "DAY"])
    expect(unknown.code).not.toBe(0)
    expect(unknown.stderr).toContain("cus_unknown")
  })
})
