import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp } from "./support/TestApp.ts"

let app: TestApp

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

describe("billing org and customer commands", () => {
  it("org create prints exactly {organization: {id, name}, apiKey} and the key works over HTTP", async () => {
    const created = await app.cli(["org", "create", "--name", "Acme", "--json"])
    expect(created.code).toBe(0)
    expect(Object.keys(created.json).sort()).toEqual(["apiKey", "organization"])
    expect(Object.keys(created.json.organization).sort()).toEqual(["id", "name"])
    expect(created.json.organization.name).toBe("Acme")
    const response = await app.request("GET", "/customers", { key: created.json.apiKey })
    expect(response.status).toBe(200)
  })

  it("customer create/get/update/archive through the CLI are visible over HTTP", async () => {
    const org = (await app.cli(["org", "create", "--name", "Cli Co", "--json"])).json
    const env = { BILLING_ORG: org.organization.id }
    const created = await app.cli(
      ["customer", "create", "--name", "Ada", "--email", "ada@example.com", "--external-id", "ada-1", "--json"],
      env
    )
    expect(created.code).toBe(0)
    const id = created.json.customer.id
    const overHttp = await app.request("GET", "/customers/ext/ada-1", { key: org.apiKey })
    expect(overHttp.body.result.customer.id).toBe(id)

    const updated = await app.cli(["customer", "update", id, "--name", "Ada L.", "--json"], env)
    expect(updated.json.customer.name).toBe("Ada L.")
    const got = await app.cli(["customer", "get", "--external-id", "ada-1", "--json"], env)
    expect(got.json.customer.name).toBe("Ada L.")

    const archived = await app.cli(["customer", "archive", id, "--json"], env)
    expect(archived.json.customer.archivedAt).not.toBeNull()
    expect((await app.request("GET", "/customers/ext/ada-1", { key: org.apiKey })).status).toBe(404)
  })

  it("reads a create body from --file, flags overriding it", async () => {
    const org = (await app.cli(["org", "create", "--name", "File Co", "--json"])).json
    const fs = await import("node:fs")
    const os = await import("node:os")
    const path = await import("node:path")
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "billing-")), "customer.yaml")
    fs.writeFileSync(file, "name: From File\nemail: file@example.com\ncity: Braga\n")
    const created = await app.cli(
      ["customer", "create", "--org", org.organization.id, "--file", file, "--name", "Flag Wins", "--json"]
    )
    expect(created.code).toBe(0)
    expect(created.json.customer).toMatchObject({ name: "Flag Wins", email: "file@example.com", city: "Braga" })
  })

  it("fails with a message on stderr and a non-zero exit, printing nothing on stdout", async () => {
    const org = (await app.cli(["org", "create", "--name", "Err Co", "--json"])).json
    const bad = await app.cli(["customer", "create", "--org", org.organization.id, "--name", "X", "--email", "nope", "--json"])
    expect(bad.code).not.toBe(0)
    expect(bad.stdout).toBe("")
    expect(bad.stderr).toContain("email")
    const noOrg = await app.cli(["customer", "list", "--json"], { BILLING_ORG: "" })
    expect(noOrg.code).not.toBe(0)
    expect(noOrg.stderr).toContain("--org")
    const unknownOrg = await app.cli(["customer", "list", "--org", "org_nope", "--json"])
    expect(unknownOrg.code).not.toBe(0)
    expect(unknownOrg.stderr).toContain("not found")
  })

  it("renders tables for people when --json is absent", async () => {
    const org = (await app.cli(["org", "create", "--name", "Table Co", "--json"])).json
    await app.cli(["customer", "create", "--org", org.organization.id, "--name", "Tab", "--email", "tab@example.com"])
    const listed = await app.cli(["customer", "list", "--org", org.organization.id])
    expect(listed.code).toBe(0)
    expect(listed.stdout).toContain("EMAIL")
    expect(listed.stdout).toContain("tab@example.com")
  })

  it("migrate on a migrated database applies nothing", async () => {
    const migrated = await app.cli(["migrate", "--json"])
    expect(migrated.code).toBe(0)
    expect(migrated.json).toEqual({ applied: [] })
  })
})
