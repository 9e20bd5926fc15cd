/**
 * `Entitlements.checkNow`, the check lane's door (a callback, no fiber of the
 * caller's), answers every check exactly as `Entitlements.check` does: a
 * customer with nothing queued from its one coalesced read, judged in memory;
 * one with queued signals, and a reserving check, through `check` in a fiber
 * of the service's; an unknown customer, a request naming none. A withdrawn
 * check is never answered, and its hold is never made.
 */
import { BigDecimal, Effect, Exit } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Entitlements } from "../src/entitlements/Entitlements.ts"
import type { CheckRequest } from "../src/entitlements/Entitlement.ts"
import { client, customerWithChatCredits, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
/** A tenant of its own for the queued customer: a workspace has one credit of agentKey "chat". */
let other: Tenant
let idle: string
let busy: string

const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Check now")
  idle = await customerWithChatCredits(app, acme, { externalId: "idle-ext" }, 10)
  other = await app.tenant("Check now, queued")
  busy = await customerWithChatCredits(app, other, {}, 10)
  // Two signals left queued (no worker runs in tests unless one drains): 2.4 credits pending.
  for (let i = 0; i < 2; i++) {
    expect((await client(app, other).post("/signal/credit", { customerId: busy, agentKey: "chat", usage })).status).toBe(202)
  }
})
afterAll(() => app.close())

/** The tenant whose customer `request` names. */
const tenantOf = (request: CheckRequest) => (request.customerId === busy ? other : acme)

/** `checkNow` as an effect: its one answer. */
const checkNow = (request: CheckRequest) =>
  app.run(Effect.flatMap(Entitlements, (entitlements) =>
    Effect.async<Exit.Exit<unknown, unknown>>((resume) => {
      let answers = 0
      entitlements.checkNow(tenantOf(request).organizationId, request, (exit) => {
        answers++
        expect(answers).toBe(1)
        resume(Effect.succeed(exit))
      })
    })))
const check = (request: CheckRequest) =>
  app.run(Effect.exit(Effect.flatMap(Entitlements, (entitlements) => entitlements.check(tenantOf(request).organizationId, request))))

const request = (fields: Record<string, unknown>) => fields as unknown as CheckRequest

describe("Entitlements.checkNow", () => {
  it.each([
    ["nothing queued, by id", () => request({ customerId: idle, meter: "CREDIT", agentKey: "chat", usage })],
    ["nothing queued, by externalId", () => request({ externalId: "idle-ext", meter: "CREDIT", agentKey: "chat", usage })],
    ["nothing queued, out of allowance (24 credits asked of 10)", () =>
      request({ customerId: idle, meter: "CREDIT", agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 20000, outputTokens: 10000 } })],
    ["nothing queued, a meter the plan does not hold", () => request({ customerId: idle, meter: "UNIT", agentKey: "chat", quantity: 1 })],
    ["queued signals priced in memory", () => request({ customerId: busy, meter: "CREDIT", agentKey: "chat", usage })],
    ["an unknown customer", () => request({ customerId: "cus_unknown", meter: "CREDIT", agentKey: "chat", usage })],
    ["no customer named", () => request({ meter: "CREDIT", agentKey: "chat", usage })],
    ["an agentKey that is no live credit", () => request({ customerId: idle, meter: "CREDIT", agentKey: "nope", usage })]
  ])("answers as check does: %s", async (_, make) => {
    const viaCallback = await checkNow(make())
    const viaEffect = await check(make())
    expect(viaCallback).toStrictEqual(viaEffect)
  })

  it("answers the queued customer's pending credits from its queue, as check does", async () => {
    const answer = await checkNow(request({ customerId: busy, meter: "CREDIT", agentKey: "chat", usage }))
    expect(Exit.isSuccess(answer)).toBe(true)
    const result = (answer as Exit.Success<{ pending: BigDecimal.BigDecimal; remaining: BigDecimal.BigDecimal }, never>).value
    expect([BigDecimal.format(result.pending), BigDecimal.format(result.remaining)]).toEqual(["2.4", "10"])
  })

  it("makes a reserving check's hold, once", async () => {
    const answer = await checkNow(request({ customerId: idle, meter: "CREDIT", agentKey: "chat", usage, reserve: { ttlSeconds: 60 } }))
    const { reservationId } = (answer as Exit.Success<{ reservationId: string }, never>).value
    const rows = await query<{ amount: string }>(app, "SELECT amount::text FROM reservations WHERE organization_id = $1 AND id = $2", [
      acme.organizationId,
      reservationId
    ])
    expect(rows.map((row) => Number(row.amount))).toEqual([1.2])
  })

  it("never answers a withdrawn check, nor makes its hold", async () => {
    const holdsBefore = await query<{ count: string }>(app, "SELECT count(*) FROM reservations WHERE organization_id = $1", [acme.organizationId])
    const answered = await app.run(Effect.flatMap(Entitlements, (entitlements) =>
      Effect.gen(function*() {
        let answers = 0
        const withdraw = [
          entitlements.checkNow(acme.organizationId, request({ customerId: idle, meter: "CREDIT", agentKey: "chat", usage }), () => answers++),
          entitlements.checkNow(
            acme.organizationId,
            request({ customerId: idle, meter: "CREDIT", agentKey: "chat", usage, reserve: { ttlSeconds: 60 } }),
            () => answers++
          )
        ]
        withdraw.forEach((withdrawIt) => withdrawIt())
        // A later check, answered, shows the withdrawn ones had their turn.
        yield* entitlements.check(acme.organizationId, request({ customerId: idle, meter: "CREDIT", agentKey: "chat", usage }))
        yield* Effect.sleep("200 millis")
        return answers
      })))
    expect(answered).toBe(0)
    const holdsAfter = await query<{ count: string }>(app, "SELECT count(*) FROM reservations WHERE organization_id = $1", [acme.organizationId])
    expect(holdsAfter).toEqual(holdsBefore)
  })
})
