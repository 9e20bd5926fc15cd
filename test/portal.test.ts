import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Portal } from "../src/portal/Portal.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { type Client, clientOf, expectError, makeCustomer, ok } from "./billing-support.ts"
import type { OrganizationId } from "../src/ids.ts"

let app: TestApp
let acme: Tenant
let other: Tenant
let api: Client
let otherApi: Client

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  other = await app.tenant("Other")
  api = clientOf(app, acme)
  otherApi = clientOf(app, other)
})
afterAll(() => app.close())

const verify = (organizationId: OrganizationId, token: string, now?: Date) =>
  app.run(Effect.flatMap(Portal, (portal) => portal.verify(organizationId, token, now)))

describe("POST /portal/token", () => {
  it("mints a short-lived signed token for a customer", async () => {
    const customer = await makeCustomer(api)
    const before = Date.now()
    const result = ok(await api.post("/portal/token", { customerId: customer.id, organizationId: acme.organizationId }))
    const after = Date.now()
    expect(result).toEqual({
      token: expect.stringMatching(/^pt_[A-Za-z0-9_-]+\.[0-9a-f]{64}$/),
      expiresAt: expect.any(String),
      customerId: customer.id,
      organizationId: acme.organizationId,
      url: `${new URL(app.baseUrl).origin}/portal?token=${encodeURIComponent(result.token)}`
    })
    // 15 minutes from a moment of the request, however long the request took.
    const expiresAt = new Date(result.expiresAt).getTime()
    expect(expiresAt).toBeGreaterThanOrEqual(before + 15 * 60_000)
    expect(expiresAt).toBeLessThanOrEqual(after + 15 * 60_000)

    const claims = await verify(acme.organizationId, result.token)
    expect(claims._tag === "Some" && claims.value.customerId).toBe(customer.id)
    // Tamper with the signature's last digit; "0" would be no change 1 time in 16.
    const tampered = `${result.token.slice(0, -1)}${result.token.endsWith("0") ? "1" : "0"}`
    expect(tampered).not.toBe(result.token)
    expect((await verify(acme.organizationId, tampered))._tag).toBe("None")
    expect((await verify(other.organizationId, result.token))._tag).toBe("None")
    expect((await verify(acme.organizationId, result.token, new Date(Date.now() + 16 * 60_000)))._tag).toBe("None")
  })

  it("answers 403 for another organisation's id, 404 for another organisation's customer", async () => {
    const customer = await makeCustomer(api)
    expectError(await api.post("/portal/token", { customerId: customer.id, organizationId: other.organizationId }), 403, "organization_mismatch")
    expectError(await otherApi.post("/portal/token", { customerId: customer.id }), 404, "customer_not_found")
    expectError(await api.post("/portal/token", { customerId: "cus_nope" }), 404, "customer_not_found")
  })

  it.each([[{}], [{ customerId: "" }], [{ customerId: 5 }], [{ customerId: "c", scope: "all" }]])(
    "refuses %j with 400",
    async (body) => {
      expectError(await api.post("/portal/token", body), 400, "validation_failed")
    }
  )

  it("needs a key", async () => {
    expectError(await app.request("POST", "/portal/token", { body: { customerId: "x" } }), 401, "api_key_refused")
  })
})
