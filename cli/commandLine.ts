/**
 * What every `billing` command tree shares, the real one (cli/program.ts) and
 * the one that only answers help requests (cli/helpTree.ts): the root's
 * settings, the usage line shown after a usage error, and how commander's own
 * exits (help, version, usage errors) become exit codes. Commander only; this
 * module is on the path of `billing --help`.
 */
import { Command, CommanderError } from "commander"
import { heldCommanderErrors, holdCommanderError, setActiveCommand, withActiveCommandSlot } from "./activeCommand.ts"
import { errorDocument, wantsJson } from "./errorDocument.ts"
import { ExitCode } from "./exitCodes.ts"
import { writeErr, writeOut } from "./Output.ts"

/**
 * The root, configured before any subcommand is added: subcommands inherit
 * exitOverride and the output settings when they are created.
 */
export const newRoot = (name: string): Command =>
  new Command(name)
    .exitOverride()
    .configureOutput({
      writeOut,
      // A `--json` run tells commander's errors as one JSON document (parseCommandLine).
      writeErr: (text) => {
        if (!holdCommanderError(text)) writeErr(text)
      }
    })
    .hook("preAction", (_program, actionCommand) => setActiveCommand(actionCommand))

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
export const addUsageHints = (command: Command): Command => {
  command.showHelpAfterError(`usage: ${commandPath(command)} ${command.usage()}\nsee '${commandPath(command)} --help'`)
  for (const sub of command.commands) addUsageHints(sub)
  return command
}

/**
 * Parses and runs `args` (without `node billing`) on the current `CliIo`,
 * setting the exit code instead of exiting: commander's own exits (help,
 * version, usage errors) are caught here, usage errors as exit code 2.
 */
export const parseCommandLine = async (
  program: Command,
  args: ReadonlyArray<string>,
  setExitCode: (code: number) => void
): Promise<void> => {
  const json = wantsJson(args)
  await withActiveCommandSlot(async () => {
    try {
      await program.parseAsync([...args], { from: "user" })
    } catch (error) {
      if (!(error instanceof CommanderError)) throw error
      // Asked-for help (`--help`, `billing help customer`) and the version succeed: commander
      // stops on them with exit code 0. Anything else it stops on is a usage error, help shown
      // because a command was missing (`billing customer`) included.
      const held = heldCommanderErrors() ?? []
      if (error.exitCode === 0) {
        for (const text of held) writeErr(text)
      } else if (json) {
        const message = error.code === "commander.help" || error.message === "(outputHelp)"
          ? `a command is required: see '${[...args.filter((arg) => !arg.startsWith("-")), "--help"].join(" ")}'`
          : error.message.replace(/^error: /, "")
        // A command line that does not parse fails its schema: `codeOf("ValidationFailed")` (src/errors.ts),
        // written out because this path imports nothing of the service (test/terminal-edges.test.ts holds them equal).
        writeErr(errorDocument(400, message, "validation_failed"))
      }
      setExitCode(error.exitCode === 0 ? ExitCode.ok : ExitCode.usage)
    }
  }, { holdCommanderErrors: json })
}
