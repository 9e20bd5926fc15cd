/**
 * `billing --help` is answered from the command tree the build writes to
 * dist/cli/commands.json (cli/helpTree.ts), without loading a command. These
 * tests hold it to the real tree: every command's help, byte for byte, and
 * the exit code; and the built CLI's help loads no database module.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { parseCommandLine } from "../cli/commandLine.ts"
import { type CommandShape, isHelpRequest, mayAskForHelp, programFromShape, shapeOf } from "../cli/helpTree.ts"
import { buildProgram, runCliInProcess, runInProcess } from "../cli/program.ts"

const root = fileURLToPath(new URL("..", import.meta.url))

/** The whole tree as the build writes it: through JSON, so only what survives a file counts. */
const writtenShape = async (): Promise<CommandShape> => JSON.parse(JSON.stringify(shapeOf(await buildProgram())))

const commandPaths = (shape: CommandShape, prefix: ReadonlyArray<string> = []): Array<ReadonlyArray<string>> => [
  prefix,
  ...shape.commands.flatMap((sub) => commandPaths(sub, [...prefix, sub.name]))
]

const fromShape = (shape: CommandShape) => (args: ReadonlyArray<string>, setExitCode: (code: number) => void) =>
  parseCommandLine(programFromShape(shape), args, setExitCode)

describe("the help tree", () => {
  it("prints every command's help exactly as the real tree does, on a pipe and on a narrow terminal", async () => {
    const shape = await writtenShape()
    const paths = commandPaths(shape)
    expect(paths.length).toBeGreaterThan(100)
    for (const tty of [undefined, { columns: 60 }]) {
      for (const commandPath of paths) {
        const args = [...commandPath, "--help"]
        const options = { env: {}, ...(tty ? { tty } : {}) }
        const real = await runCliInProcess(args, options)
        const rebuilt = await runInProcess(fromShape(shape), args, options)
        expect({ args, ...rebuilt }).toEqual({ args, ...real })
        expect(real.code).toBe(0)
      }
    }
  })

  it("answers the other pure help requests as the real tree does: none, help, -h, the version", async () => {
    const shape = await writtenShape()
    for (const args of [[], ["help"], ["help", "customer"], ["-h"], ["customer", "-h"], ["-V"], ["--version"]]) {
      expect(isHelpRequest(shape, args)).toBe(true)
      const real = await runCliInProcess(args, { env: {} })
      const rebuilt = await runInProcess(fromShape(shape), args, { env: {} })
      expect({ args, ...rebuilt }).toEqual({ args, ...real })
    }
    expect((await runCliInProcess(["--version"], { env: {} })).stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/)
    // Help that was asked for succeeds; help shown for a missing command or subcommand is a usage error.
    const codes = async (args: ReadonlyArray<string>) => (await runCliInProcess(args, { env: {} })).code
    expect([await codes(["help"]), await codes(["help", "customer"]), await codes(["customer", "--help"])]).toEqual([0, 0, 0])
    expect([await codes([]), await codes(["customer"])]).toEqual([2, 2])
  })

  it("leaves to the real tree anything that is not a pure help request", async () => {
    const shape = await writtenShape()
    expect(isHelpRequest(shape, ["customer", "list"])).toBe(false)
    expect(isHelpRequest(shape, ["customer", "list", "--json", "--help"])).toBe(false)
    expect(isHelpRequest(shape, ["customr", "--help"])).toBe(false)
    expect(isHelpRequest(shape, ["help", "customr"])).toBe(false)
    expect(isHelpRequest(shape, ["--help", "customer"])).toBe(false)
    expect(isHelpRequest(shape, ["-V", "customer"])).toBe(false)
    // A command line that is no help request starts without reading the tree at all.
    expect(mayAskForHelp(["customer", "list", "--json"])).toBe(false)
    expect(mayAskForHelp(["worker"])).toBe(false)
    for (const args of [[], ["help", "customer"], ["customer", "-h"], ["--version"]]) expect(mayAskForHelp(args)).toBe(true)
  })
})

describe("the built billing --help", () => {
  // Every module the process loads, as resolved URLs, through a resolve hook.
  const hooks = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "billing-help-")), "trace.mjs")
  fs.writeFileSync(
    hooks,
    `import { register } from "node:module"
register("data:text/javascript," + encodeURIComponent(
  "export async function resolve(s, c, next) { const r = await next(s, c); console.error('LOADED ' + r.url); return r }"))
`
  )
  const spawnTraced = (args: ReadonlyArray<string>) =>
    new Promise<{ code: number | null; stdout: string; loaded: Array<string> }>((resolve) => {
      execFile(process.execPath, ["--import", hooks, `${root}bin/billing.mjs`, ...args], { env: { ...process.env, DATABASE_URL: "" } }, (error, stdout, stderr) =>
        resolve({
          code: error ? (typeof error.code === "number" ? error.code : 1) : 0,
          stdout,
          loaded: [...new Set(stderr.split("\n").filter((line) => line.startsWith("LOADED ")).map((line) => line.slice(7)))]
        }))
    })

  it("comes from the build, equals the real tree's help, and loads no command, service or database module", async () => {
    const help = await spawnTraced(["--help"])
    expect(help.code).toBe(0)
    expect(help.stdout).toBe((await runCliInProcess(["--help"], { env: {} })).stdout)
    expect(help.loaded).toContain(`file://${root}dist/cli/main.js`)
    const ours = help.loaded.filter((url) => url.startsWith("file:"))
    expect(ours.some((url) => /\/(pg|pg-pool|@electric-sql)\//.test(url))).toBe(false)
    // The bundle marks each module it inlines with its path: none of src/, nor Effect, is in what --help loaded.
    const text = ours.map((url) => fs.readFileSync(fileURLToPath(url), "utf8")).join("\n")
    expect(text).not.toMatch(/^\/\/ (src|cli\/commands)\//m)
    expect(text).not.toMatch(/^\/\/ .*node_modules\/(effect|@effect)\//m)

    // A command that runs loads what it needs: the database layer among it.
    const list = await spawnTraced(["customer", "list", "--help", "--json"])
    expect(list.code).toBe(0)
    const listText = list.loaded.filter((url) => url.startsWith("file:")).map((url) => fs.readFileSync(fileURLToPath(url), "utf8")).join("\n")
    expect(listText).toMatch(/^\/\/ src\/db\//m)
  })
})
