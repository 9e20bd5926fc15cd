/**
 * The CLI as an operator meets it: output through a pipe (spawned, so stdout
 * really is not a terminal), tables fitted to a terminal, lists newest first
 * with the next page's cursor, errors in the words of the flags, exit codes.
 * The spawned runs are also the smoke test of each command group: the rest of
 * the suite runs commands in-process (test/support/TestApp.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runCliInProcess } from "../cli/program.ts"
import { startTestApp, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let org: string
let customerId: string

const ESC = "\u001b"

beforeAll(async () => {
  app = await startTestApp()
  const seeded = await app.cli(["seed", "--json"])
  expect(seeded.code).toBe(0)
  org = seeded.json.organization.id
  customerId = seeded.json.records.find((record: { kind: string }) => record.kind === "customer").id
})
afterAll(() => app.close())

/** Every id in a `--json` list, whatever the list's key. */
const idsOf = (json: Record<string, unknown>): Array<string> =>
  Object.values(json).flatMap((value) =>
    Array.isArray(value) ? value.filter((row) => typeof row?.id === "string").map((row) => row.id as string) : [])

describe("output through a pipe", () => {
  // One command per group, spawned: a real process whose stdout is a pipe.
  const listings: ReadonlyArray<ReadonlyArray<string>> = [
    ["customer", "list"],
    ["purchase", "list"],
    ["credit", "list"],
    ["outcome", "list"],
    ["unit", "list"],
    ["composite", "list"],
    ["plan", "list"],
    ["model", "list"],
    ["invoice", "list"],
    ["webhook", "deliveries"],
    ["webhook", "list"],
    ["key", "list"]
  ]

  it("prints no escape codes and exactly one line per record, for every command group's list", async () => {
    const piped = await Promise.all(listings.map((args) => app.spawnCli([...args, "--org", org])))
    for (const [index, args] of listings.entries()) {
      const result = piped[index]!
      expect(result.code, `${args.join(" ")}: ${result.stderr}`).toBe(0)
      expect(result.stdout, args.join(" ")).not.toContain(ESC)
      const json = (await app.cli([...args, "--org", org, "--json"])).json
      const ids = idsOf(json)
      expect(ids.length, args.join(" ")).toBeGreaterThan(0)
      const lines = result.stdout.split("\n")
      const holds = (line: string, id: string) => line.split(/\s+/).includes(id)
      for (const id of ids) expect(lines.filter((line) => holds(line, id)), `${args.join(" ")}: ${id}`).toHaveLength(1)
      // Nothing wrapped: the rows follow each other, no blank line or fragment of a row between them.
      const body = lines.slice(lines.findIndex((line) => ids.some((id) => holds(line, id))))
      const rows = body.slice(0, ids.length)
      expect(rows.every((line) => ids.some((id) => holds(line, id))), `${args.join(" ")}:\n${result.stdout}`).toBe(true)
    }
  })

  it("the other command groups run as a process through a pipe, with no escape codes", async () => {
    const smoke: ReadonlyArray<ReadonlyArray<string>> = [
      ["status", "--org", org],
      ["org", "list"],
      ["balance", "show", customerId, "--org", org],
      ["wallet", "ledger", customerId, "--org", org],
      ["tax", "list", "--org", org],
      ["member", "list", customerId, "--org", org],
      ["usage", "--customer", customerId, "--org", org],
      ["signal", "list", "--org", org]
    ]
    const piped = await Promise.all(smoke.map((args) => app.spawnCli(args)))
    for (const [index, args] of smoke.entries()) {
      expect(piped[index]!.code, `${args.join(" ")}: ${piped[index]!.stderr}`).toBe(0)
      expect(piped[index]!.stdout, args.join(" ")).not.toContain(ESC)
    }
  })

  it("fixtures load, --version and completion through a pipe: no progress frames, no cursor codes", async () => {
    const fs = await import("node:fs")
    const os = await import("node:os")
    const path = await import("node:path")
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "billing-")), "fixtures.yaml")
    fs.writeFileSync(
      file,
      "customers:\n  - { name: Pipe A, email: a@example.com, externalId: pipe-a }\n  - { name: Pipe B, email: b@example.com, externalId: pipe-b }\n"
    )
    const [loaded, version, completion] = await Promise.all([
      app.spawnCli(["fixtures", "load", file, "--org", org]),
      app.spawnCli(["--version"]),
      app.spawnCli(["completion", "bash"])
    ])
    expect(loaded.code, loaded.stderr).toBe(0)
    expect(loaded.stdout).not.toContain(ESC)
    expect(loaded.stdout).not.toContain("█")
    expect(loaded.stdout.split("\n").filter((line) => line.includes("pipe-"))).toHaveLength(2)
    const { default: packageJson } = await import("../package.json", { with: { type: "json" } })
    expect(version.stdout.trim()).toBe(packageJson.version)
    expect(completion.code).toBe(0)
    expect(completion.stdout).toContain("complete -o default -F _billing_complete billing")
  })

  it("NO_COLOR keeps a terminal plain, and a terminal fits its width without cutting ids or statuses", async () => {
    const env = { ...process.env, DATABASE_URL: app.databaseUrl }
    for (const columns of [60, 80, 120]) {
      const narrow = await runCliInProcess(["customer", "list", "--org", org], { env, tty: { columns } })
      const lines = narrow.stdout.trimEnd().split("\n")
      expect(lines.every((line) => line.replace(/\u001b\[[0-9;]*m/g, "").length < columns), narrow.stdout).toBe(true)
      // Ids and statuses are never cut: ids are what the next command needs, a status cut short says nothing.
      expect(narrow.stdout).toContain(customerId)
      expect(narrow.stdout).toMatch(/\bactive\b/)
    }
    const noColor = await runCliInProcess(["customer", "list", "--org", org], {
      env: { ...env, NO_COLOR: "1" },
      tty: { columns: 60 }
    })
    expect(noColor.stdout).not.toContain(ESC)
    expect(noColor.stdout).not.toContain("…")
  })
})

describe("lists", () => {
  it("show the newest first, --oldest flips, and --json carries nextCursor; the footer says more exist", async () => {
    const key = (await app.cli(["key", "create", "--org", org, "--json"])).json.apiKey
    for (const name of ["one", "two", "three"]) {
      const created = await app.request("POST", "/signal/unit", {
        key,
        body: { customerId, agentKey: "api-call", quantity: 1, idempotencyKey: `list-${name}` }
      })
      expect(created.status, JSON.stringify(created.body)).toBe(202)
    }
    const ids = (await app.cli(["signal", "list", "--org", org, "--oldest", "--json"])).json.signals.map((s: { id: string }) => s.id)
    expect(ids).toHaveLength(3)
    const newest = await app.cli(["signal", "list", "--org", org, "--limit", "2", "--json"])
    expect(newest.json.signals.map((s: { id: string }) => s.id)).toEqual([ids[2], ids[1]])
    expect(newest.json.nextCursor).toBe(ids[1])
    const next = await app.cli(["signal", "list", "--org", org, "--limit", "2", "--cursor", ids[1]!, "--json"])
    expect(next.json.signals.map((s: { id: string }) => s.id)).toEqual([ids[0]])
    expect(next.json.nextCursor).toBeNull()
    const table = await app.cli(["signal", "list", "--org", org, "--limit", "2"])
    expect(table.stdout).toContain(`more rows: repeat with --cursor ${ids[1]}`)
    const catalogue = await app.cli(["unit", "list", "--org", org, "--limit", "1", "--json"])
    expect(catalogue.json.nextCursor).toBe(catalogue.json.units[0].id)
  })
})

describe("errors for people", () => {
  it("names the flags, not the API fields, one line per problem", async () => {
    const result = await app.cli(["credit", "create", "--org", org, "--name", "X"])
    expect(result.code).toBe(2)
    expect(result.stdout).toBe("")
    expect(result.stderr).toBe("error: invalid input:\n  --agent-key is required\n  --margin is required\n  --model-bundle is required\n")
    const nested = await app.cli([
      "credit", "create", "--org", org, "--name", "X", "--agent-key", "x", "--margin", "10", "--model-bundle", '[{"modelId": 3}]'
    ])
    expect(nested.stderr).toContain("--model-bundle[1].modelId must be text (got 3)")
    expect(nested.stderr).not.toMatch(/Expected|readonly|agentKey|marginPercent/)
  })

  it("lists every allowed value of a choice", async () => {
    const status = await app.cli(["signal", "list", "--org", org, "--status", "WRONG"])
    expect(status.code).toBe(2)
    expect(status.stderr).toBe('error: --status must be one of QUEUED, PROCESSED, PENDING, FAILED (got "WRONG")\n')
    const meter = await app.cli(["usage", "--org", org, "--customer", customerId, "--meter", "nope"])
    expect(meter.stderr).toBe('error: --meter must be one of CREDIT, OUTCOME_STEP, OUTCOME, UNIT, WALLET, COMPOSITE (got "NOPE")\n')
  })

  it("a usage error prints the command's usage line and a --help hint, not the whole help; exit code 2", async () => {
    const unknown = await app.cli(["frobnicate"])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toBe("error: unknown command 'frobnicate'\nusage: billing [options] [command]\nsee 'billing --help'\n")
    const noId = await app.cli(["customer", "get", "--org", org])
    expect(noId.code).toBe(2)
    expect(noId.stderr).toBe(
      "error: give the customer's id, or --external-id ID\nusage: billing customer get [options] [id]\nsee 'billing customer get --help'\n"
    )
  })

  it("exit codes tell the kind of failure: not found 4, conflict 5", async () => {
    const missing = await app.cli(["customer", "get", "cus_nope", "--org", org])
    expect(missing.code).toBe(4)
    const archived = await app.cli(["customer", "create", "--org", org, "--name", "Z", "--email", "z@example.com", "--json"])
    await app.cli(["customer", "archive", archived.json.customer.id, "--org", org])
    const changed = await app.cli(["customer", "update", archived.json.customer.id, "--name", "Y", "--org", org])
    expect(changed.code, changed.stderr).toBe(5)
  })
})
