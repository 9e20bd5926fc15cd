/**
 * The `billing` command tree, built fresh on every call, and the two ways to
 * run it: as the process (`cli/main.ts`) or in-process on streams and an
 * environment of the caller's choosing (`runCliInProcess`, for tests: the
 * same command functions without starting a Node process each time).
 */
import { Command, CommanderError } from "commander"
import packageJson from "../package.json" with { type: "json" }
import { registerAdjust } from "./commands/adjust.tsx"
import { registerBalance } from "./commands/balance.tsx"
import { registerComposite } from "./commands/composite.tsx"
import { registerCompletion } from "./commands/completion.ts"
import { registerCredit } from "./commands/credit.tsx"
import { registerCustomer } from "./commands/customer.tsx"
import { registerCycle } from "./commands/cycle.tsx"
import { registerInvoice } from "./commands/invoice.tsx"
import { registerMember } from "./commands/member.tsx"
import { registerModel } from "./commands/model.tsx"
import { registerKey, registerOrg } from "./commands/org.tsx"
import { registerOutcome } from "./commands/outcome.tsx"
import { registerPlan } from "./commands/plan.tsx"
import { registerPortal } from "./commands/portal.tsx"
import { registerPurchase } from "./commands/purchase.tsx"
import { registerServe } from "./commands/serve.tsx"
import { registerSignal } from "./commands/signal.tsx"
import { registerStatus } from "./commands/status.tsx"
import { registerTax } from "./commands/tax.tsx"
import { registerToolkit } from "./commands/toolkit.tsx"
import { registerUnit } from "./commands/unit.tsx"
import { registerUsage } from "./commands/usage.tsx"
import { registerWallet } from "./commands/wallet.tsx"
import { registerListen } from "./commands/listen.tsx"
import { registerWebhook } from "./commands/webhook.tsx"
import { registerWorker } from "./commands/worker.tsx"
import { setActiveCommand, withActiveCommandSlot } from "./activeCommand.ts"
import { ExitCode } from "./exitCodes.ts"
import { type CliIo, withCliIo, writeErr, writeOut } from "./Output.ts"

export const version: string = packageJson.version

/** `billing customer get`, as a person would type it. */
export const commandPath = (command: Command): string => {
  const names: Array<string> = []
  for (let at: Command | null = command; at !== null; at = at.parent) names.unshift(at.name())
  return names.join(" ")
}

/**
 * After a usage error, the command's own usage line and where to read more:
 * the whole help of a command with forty subcommands buries the one line
 * that says what went wrong.
 */
const usageHints = (command: Command) => {
  command.showHelpAfterError(`usage: ${commandPath(command)} ${command.usage()}\nsee '${commandPath(command)} --help'`)
  for (const sub of command.commands) usageHints(sub)
}

export const buildProgram = (): Command => {
  const program = new Command("billing")
    .description("usage metering and billing for AI products")
    .version(version, "-V, --version", "print the version")
    .exitOverride()
    .configureOutput({ writeOut, writeErr })
    .hook("preAction", (_program, actionCommand) => setActiveCommand(actionCommand))

  registerServe(program)
  registerWorker(program)
  registerStatus(program)
  registerOrg(program)
  registerKey(program)
  registerCustomer(program)
  registerPurchase(program)
  registerCycle(program)
  registerBalance(program)
  registerAdjust(program)
  registerWallet(program)
  registerInvoice(program)
  registerTax(program)
  registerMember(program)
  registerPortal(program)
  registerSignal(program)
  registerUsage(program)
  registerModel(program)
  registerCredit(program)
  registerOutcome(program)
  registerWebhook(program)
  registerListen(program)
  registerToolkit(program)
  registerUnit(program)
  registerComposite(program)
  registerPlan(program)
  registerCompletion(program)
  usageHints(program)
  return program
}

/**
 * Parses and runs `args` (without `node billing`) on the current `CliIo`,
 * returning the exit code instead of exiting: commander's own exits (help,
 * version, usage errors) are caught here, usage errors as exit code 2.
 */
export const runCli = async (args: ReadonlyArray<string>, setExitCode: (code: number) => void): Promise<void> => {
  const program = buildProgram()
  try {
    await withActiveCommandSlot(() => program.parseAsync([...args], { from: "user" }))
  } catch (error) {
    if (!(error instanceof CommanderError)) throw error
    // Asked-for help and the version succeed; anything else commander stops on is a usage error.
    const asked = error.code === "commander.helpDisplayed" || error.code === "commander.version"
    setExitCode(asked ? ExitCode.ok : ExitCode.usage)
  }
}

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
export const runCliInProcess = async (args: ReadonlyArray<string>, options: InProcessOptions): Promise<InProcessRun> => {
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
  await withCliIo(io, () => runCli(args, io.setExitCode))
  let json: unknown
  try {
    json = JSON.parse(stdout)
  } catch {
    json = undefined
  }
  return { code, stdout, stderr, json }
}
