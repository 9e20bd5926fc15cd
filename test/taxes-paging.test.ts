/** GET /taxes pages like every other list: `limit` (default 50, clamped to 200) and `cursor`. */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp } from "./support/TestApp.ts"
import { type Client, clientOf, expectError, ok } from "./billing-support.ts"

let app: TestApp
let api: Client

beforeAll(async () => {
  app = await startTestApp()
  api = clientOf(app, await app.tenant("Taxed"))
})
afterAll(() => app.close())

describe("GET /taxes", () => {
  it("pages by limit and cursor, oldest first, with active=true on top", async () => {
    const names = ["A", "B", "C", "D", "E"]
    const ids: Array<string> = []
    for (const name of names) ids.push(ok(await api.post("/taxes", { name, ratePercent: 1 }), 201).tax.id)
    ok(await api.patch(`/taxes/${ids[1]}`, { active: false }))

    const first = ok(await api.get("/taxes?limit=2")).taxes
    expect(first.map((t: any) => t.name)).toEqual(["A", "B"])
    const second = ok(await api.get(`/taxes?limit=2&cursor=${first[1].id}`)).taxes
    expect(second.map((t: any) => t.name)).toEqual(["C", "D"])
    const last = ok(await api.get(`/taxes?limit=2&cursor=${second[1].id}`)).taxes
    expect(last.map((t: any) => t.name)).toEqual(["E"])

    expect(ok(await api.get("/taxes?active=true&limit=2")).taxes.map((t: any) => t.name)).toEqual(["A", "C"])
    expect(ok(await api.get("/taxes?limit=5000")).taxes).toHaveLength(5)
    expectError(await api.get("/taxes?limit=0"), 400, "validation_failed")
  })

  it("pages from the CLI: billing tax list --limit --cursor", async () => {
    const tenant = await app.tenant("Taxed CLI")
    const cliApi = clientOf(app, tenant)
    for (const name of ["X", "Y", "Z"]) ok(await cliApi.post("/taxes", { name, ratePercent: 2 }), 201)
    const org = ["--json", "--org", tenant.organizationId]
    const page = await app.cli(["tax", "list", "--limit", "2", ...org])
    expect(page.code, page.stderr).toBe(0)
    expect(page.json.taxes.map((t: any) => t.name)).toEqual(["X", "Y"])
    const rest = await app.cli(["tax", "list", "--limit", "2", "--cursor", page.json.taxes[1].id, ...org])
    expect(rest.json.taxes.map((t: any) => t.name)).toEqual(["Z"])
  })
})
