/**
 * The `billing` command tree, built fresh on every call, and the two ways to
 * run it: as the process (`cli/main.ts`) or in-process on streams and an
 * environment of the caller's choosing (`runCliInProcess`, for tests: the
 * same command functions without starting a Node process each time).
 */
import type { Command } from "commander"
import packageJson from "../package.json" with { type: "json" }
import { addUsageHints, newRoot, parseCommandLine } from "./commandLine.ts"
import { type CliIo, withCliIo } from "./Output.ts"

export const version: string = packageJson.version

type Register = (program: Command) => void

/**
 * Every top-level command, in the order help lists them, with the module that
 * registers it. A module is loaded only when its command runs (or when the
 * whole tree is wanted): `billing worker` does not load Ink views of forty
 * other commands, nor `billing org list` the worker.
 */
const commandModules: ReadonlyArray<{
  readonly name: string
  readonly register: () => Promise<Register>
  /** The command reads the tree it is registered in, so it runs in the whole one. */
  readonly wholeTree?: boolean
}> = [
  { name: "serve", register: () => import("./commands/serve.tsx").then((m) => m.registerServe) },
  { name: "worker", register: () => import("./commands/worker.tsx").then((m) => m.registerWorker) },
  { name: "status", register: () => import("./commands/status.tsx").then((m) => m.registerStatus) },
  { name: "org", register: () => import("./commands/org.tsx").then((m) => m.registerOrg) },
  { name: "key", register: () => import("./commands/org.tsx").then((m) => m.registerKey) },
  { name: "customer", register: () => import("./commands/customer.tsx").then((m) => m.registerCustomer) },
  { name: "purchase", register: () => import("./commands/purchase.tsx").then((m) => m.registerPurchase) },
  { name: "cycle", register: () => import("./commands/cycle.tsx").then((m) => m.registerCycle) },
  { name: "balance", register: () => import("./commands/balance.tsx").then((m) => m.registerBalance) },
  { name: "adjust", register: () => import("./commands/adjust.tsx").then((m) => m.registerAdjust) },
  { name: "wallet", register: () => import("./commands/wallet.tsx").then((m) => m.registerWallet) },
  { name: "invoice", register: () => import("./commands/invoice.tsx").then((m) => m.registerInvoice) },
  { name: "tax", register: () => import("./commands/tax.tsx").then((m) => m.registerTax) },
  { name: "member", register: () => import("./commands/member.tsx").then((m) => m.registerMember) },
  { name: "portal", register: () => import("./commands/portal.tsx").then((m) => m.registerPortal) },
  { name: "signal", register: () => import("./commands/signal.tsx").then((m) => m.registerSignal) },
  { name: "usage", register: () => import("./commands/usage.tsx").then((m) => m.registerUsage) },
  { name: "model", register: () => import("./commands/model.tsx").then((m) => m.registerModel) },
  { name: "credit", register: () => import("./commands/credit.tsx").then((m) => m.registerCredit) },
  { name: "outcome", register: () => import("./commands/outcome.tsx").then((m) => m.registerOutcome) },
  { name: "webhook", register: () => import("./commands/webhook.tsx").then((m) => m.registerWebhook) },
  { name: "listen", register: () => import("./commands/listen.tsx").then((m) => m.registerListen) },
  { name: "toolkit", register: () => import("./commands/toolkit.tsx").then((m) => m.registerToolkit) },
  { name: "unit", register: () => import("./commands/unit.tsx").then((m) => m.registerUnit) },
  { name: "composite", register: () => import("./commands/composite.tsx").then((m) => m.registerComposite) },
  { name: "plan", register: () => import("./commands/plan.tsx").then((m) => m.registerPlan) },
  { name: "completion", register: () => import("./commands/completion.ts").then((m) => m.registerCompletion), wholeTree: true }
]

/**
 * The command tree: the whole of it, or only the top-level command `only`
 * (which parses and runs exactly as it does in the whole tree). A name that is
 * not a command, and a command that reads the tree (`completion`), get the whole tree.
 */
export const buildProgram = async (only?: string): Promise<Command> => {
  const program = newRoot("billing")
    .description("usage metering and billing for AI products")
    .version(version, "-V, --version", "print the version")
  const named = commandModules.find((module) => module.name === only)
  const chosen = named !== undefined && named.wholeTree !== true ? [named] : commandModules
  const registers = await Promise.all(chosen.map((module) => module.register()))
  for (const register of registers) register(program)
  return addUsageHints(program)
}

/**
 * Parses and runs `args` (without `node billing`) on the current `CliIo`,
 * returning the exit code instead of exiting (see cli/commandLine.ts).
 */
export const runCli = async (args: ReadonlyArray<string>, setExitCode: (code: number) => void): Promise<void> =>
  parseCommandLine(await buildProgram(args[0]), args, setExitCode)

export interface InProcessRun {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
  /** stdout parsed as JSON, when it is. */
  readonly json: any
}

export interface InProcessOptions {
  /** The command's whole environment (process.env is not read). */
  readonly env: Readonly<Record<string, string | undefined>>
  /** Pretend stdout is a terminal this wide (default: a pipe). */
  readonly tty?: { readonly columns: number }
}

/** Runs one `billing` command in this process, with its own streams, environment and exit code. */
export const runCliInProcess = (args: ReadonlyArray<string>, options: InProcessOptions): Promise<InProcessRun> =>
  runInProcess(runCli, args, options)

/** Runs a command line through `run` (the real tree's, or another) as `runCliInProcess` does. */
export const runInProcess = async (
  run: (args: ReadonlyArray<string>, setExitCode: (code: number) => void) => Promise<void>,
  args: ReadonlyArray<string>,
  options: InProcessOptions
): Promise<InProcessRun> => {
  let stdout = ""
  let stderr = ""
  let code = 0
  const io: CliIo = {
    stdout: {
      write: (text: string) => {
        stdout += text
        return true
      },
      isTTY: options.tty !== undefined,
      columns: options.tty?.columns
    },
    stderr: {
      write: (text: string) => {
        stderr += text
        return true
      }
    },
    env: options.env,
    setExitCode: (exitCode) => {
      code = exitCode
    }
  }
  await withCliIo(io, () => run(args, io.setExitCode))
  let json: unknown
  try {
    json = JSON.parse(stdout)
  } catch {
    json = undefined
  }
  return { code, stdout, stderr, json }
}
