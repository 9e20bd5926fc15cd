import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Members } from "../src/members/Members.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { type Client, clientOf, expectError, makeCustomer, ok } from "./billing-support.ts"

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

describe("members of a customer", () => {
  it("adds, lists, updates and removes members", async () => {
    const customer = await makeCustomer(api)
    const added = ok(await api.post(`/customers/${customer.id}/members`, { email: "Ann@Example.com", name: "Ann" }), 201)
    expect(added).toEqual({
      created: true,
      member: {
        id: expect.stringMatching(/^mem_/),
        customerId: customer.id,
        email: "Ann@Example.com",
        name: "Ann",
        role: "MEMBER",
        createdAt: expect.any(String),
        updatedAt: expect.any(String)
      }
    })
    const bob = ok(await api.post(`/customers/${customer.id}/members`, { email: "bob@example.com", role: "ADMIN" }), 201).member
    expect(ok(await api.get(`/customers/${customer.id}/members`)).members.map((m: any) => m.email)).toEqual([
      "Ann@Example.com",
      "bob@example.com"
    ])
    expect(ok(await api.get(`/customers/${customer.id}/members?limit=1`)).members).toHaveLength(1)

    const updated = ok(await api.patch(`/customers/${customer.id}/members/${bob.id}`, { name: "Bob", role: "OWNER" }))
    expect(updated).toMatchObject({ updated: true, member: { id: bob.id, name: "Bob", role: "OWNER", email: "bob@example.com" } })
    const cleared = ok(await api.patch(`/customers/${customer.id}/members/${bob.id}`, { name: null }))
    expect(cleared.member.name).toBeNull()

    const found = await app.run(Effect.flatMap(Members, (members) => members.findByEmail(acme.organizationId, customer.id, "ANN@example.COM")))
    expect(found._tag === "Some" && found.value.id).toBe(added.member.id)

    const removed = ok(await api.del(`/customers/${customer.id}/members/${bob.id}`))
    expect(removed).toMatchObject({ removed: true, member: { id: bob.id } })
    expectError(await api.del(`/customers/${customer.id}/members/${bob.id}`), 404, "member_not_found")
    expect(ok(await api.get(`/customers/${customer.id}/members`)).members).toHaveLength(1)
  })

  it("refuses a duplicate e-mail within a customer case-insensitively (409), allows it on another customer", async () => {
    const customer = await makeCustomer(api)
    const second = await makeCustomer(api)
    const ann = ok(await api.post(`/customers/${customer.id}/members`, { email: "dup@example.com" }), 201).member
    expectError(await api.post(`/customers/${customer.id}/members`, { email: "DUP@example.com" }), 409, "member_email_taken")
    ok(await api.post(`/customers/${second.id}/members`, { email: "dup@example.com" }), 201)
    const bob = ok(await api.post(`/customers/${customer.id}/members`, { email: "bob2@example.com" }), 201).member
    expectError(await api.patch(`/customers/${customer.id}/members/${bob.id}`, { email: "Dup@Example.com" }), 409, "member_email_taken")
    expect(ok(await api.get(`/customers/${customer.id}/members`)).members.map((m: any) => m.id)).toEqual([ann.id, bob.id])
  })

  it.each([
    [{}],
    [{ email: "not-an-email" }],
    [{ email: "a@example.com", role: "KING" }],
    [{ email: "a@example.com", extra: 1 }]
  ])("refuses %j with 400", async (body) => {
    const customer = await makeCustomer(api)
    expectError(await api.post(`/customers/${customer.id}/members`, body), 400, "validation_failed")
    expect(ok(await api.get(`/customers/${customer.id}/members`)).members).toEqual([])
  })

  it("answers 404 for unknown customers, unknown members and other organisations", async () => {
    const customer = await makeCustomer(api)
    const member = ok(await api.post(`/customers/${customer.id}/members`, { email: "iso@example.com" }), 201).member
    expectError(await api.get("/customers/cus_nope/members"), 404, "customer_not_found")
    expectError(await api.post("/customers/cus_nope/members", { email: "x@example.com" }), 404, "customer_not_found")
    expectError(await otherApi.get(`/customers/${customer.id}/members`), 404, "customer_not_found")
    expectError(await otherApi.post(`/customers/${customer.id}/members`, { email: "x@example.com" }), 404, "customer_not_found")
    expectError(await otherApi.patch(`/customers/${customer.id}/members/${member.id}`, { name: "x" }), 404, "customer_not_found")
    expectError(await otherApi.del(`/customers/${customer.id}/members/${member.id}`), 404, "customer_not_found")
    expectError(await api.patch(`/customers/${customer.id}/members/mem_nope`, { name: "x" }), 404, "member_not_found")
  })

  it("works from the CLI", async () => {
    const customer = await makeCustomer(api)
    const added = await app.cli(["member", "add", customer.id, "--email", "cli@example.com", "--json", "--org", acme.organizationId])
    expect(added.code, added.stderr).toBe(0)
    expect(added.json.member).toMatchObject({ email: "cli@example.com", role: "MEMBER" })
    const listed = await app.cli(["member", "list", customer.id, "--json", "--org", acme.organizationId])
    expect(listed.json.members.map((m: any) => m.email)).toEqual(["cli@example.com"])
  })
})
