/**
 * The floors of docs/architecture.md, held to the code: every import between
 * folders goes to the same floor or a lower one, except the exceptions listed
 * here, each with its reason. A new folder must be given a floor. Imports are
 * read as the import-cycles tool reads them: relative `import`/`export ... from`
 * and `import(...)`, types included. The same reader (scripts/import-cycles.mjs)
 * finds no import cycle between files or folders. No database.
 */
import { execFileSync } from "node:child_process"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")

/** Bottom to top; a file belongs to the first entry its path (from the repository root) starts with. */
const floors: ReadonlyArray<{ readonly name: string; readonly paths: ReadonlyArray<string> }> = [
  {
    name: "foundation",
    paths: [
      "src/config.ts", "src/errors.ts", "src/ids.ts", "src/money.ts", "src/schema.ts", "src/Page.ts",
      "src/SchemaCheck.ts", "src/Memory.ts", "src/HeapGrowth.ts", "src/Fault.ts", "src/time.ts", "src/Telemetry.ts", "src/db/", "src/idempotency/",
      "src/WireDecimals.ts"
    ]
  },
  { name: "pricing", paths: ["src/pricing/"] },
  {
    name: "kits and shared records",
    paths: ["src/worker/", "src/links/", "src/models/", "src/organizations/", "src/webhooks/", "src/http/"]
  },
  { name: "money door", paths: ["src/ledger/"] },
  { name: "catalogue", paths: ["src/units/", "src/credits/", "src/outcomes/", "src/composites/", "src/plans/"] },
  { name: "customers", paths: ["src/customers/", "src/members/"] },
  { name: "billing", paths: ["src/billing/", "src/usage/"] },
  { name: "signals and views", paths: ["src/signals/", "src/portal/", "src/operations/", "src/toolkit/", "src/entitlements/", "src/history/"] },
  { name: "composition", paths: ["src/app/", "src/index.ts"] },
  { name: "doors", paths: ["cli/", "worker/"] }
]

/** Imports from a lower floor to a higher one that stay, for now: "from -> to" (files), with why. */
const exceptions: Record<string, string> = {}

const floorOf = (file: string): number => floors.findIndex((floor) => floor.paths.some((path) => file.startsWith(path)))

const sources = (folder: string): Array<string> =>
  readdirSync(join(root, folder)).flatMap((entry) => {
    const path = join(folder, entry)
    if (statSync(join(root, path)).isDirectory()) return sources(path)
    return /\.(ts|tsx)$/.test(entry) && !entry.endsWith(".d.ts") ? [path] : []
  })

const files = ["src", "cli", "worker"].flatMap(sources)
const known = new Set(files)
const importPattern =
  /(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*['"](\.{1,2}\/[^'"]+)['"]|import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g

const importsOf = (file: string): Array<string> =>
  [...readFileSync(join(root, file), "utf8").matchAll(importPattern)].flatMap((match) => {
    const target = relative(root, resolve(root, dirname(file), (match[1] ?? match[2])!))
    return known.has(target) ? [target] : []
  })

describe("the floors (docs/architecture.md)", () => {
  it("give every source file a floor", () => {
    expect(files.filter((file) => floorOf(file) < 0)).toEqual([])
  })

  it("are imported downward only, but for the listed exceptions", () => {
    const upward = files.flatMap((file) =>
      importsOf(file)
        .filter((target) => floorOf(target) > floorOf(file))
        .map((target) => `${file} -> ${target}`)
    )
    expect(upward.filter((edge) => exceptions[edge] === undefined)).toEqual([])
    // An exception that no longer happens is taken off the list.
    expect(Object.keys(exceptions).filter((edge) => !upward.includes(edge))).toEqual([])
  })

  it("leave no import cycle between files or between folders (scripts/import-cycles.mjs)", () => {
    // The script exits non-zero when it finds one, with the cycles' files in its output.
    const output = execFileSync(process.execPath, [join(root, "scripts/import-cycles.mjs"), root], { encoding: "utf8" })
    expect(output.trim().split("\n").at(-1)).toMatch(/^cycles: 0 .*; folder cycles: 0$/)
  })
})
