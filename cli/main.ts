/**
 * `billing`: the operator CLI. Commander parses; Ink shows; every command calls
 * the same services as the API (never the API itself). See docs/cli.md for the
 * stable forms that scripts rely on, and cli/program.ts for the command tree.
 */
import * as fs from "node:fs"
import { parseCommandLine } from "./commandLine.ts"
import { type CommandShape, isHelpRequest, mayAskForHelp, programFromShape } from "./helpTree.ts"
import { setExitCode } from "./Output.ts"

// `billing ... | head` closes the pipe early: that is the reader's choice, not a failure.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0)
  throw error
})

/** The tree written beside the built CLI (scripts/build.mjs); none when running from sources. */
const builtShape = (): CommandShape | undefined => {
  try {
    return JSON.parse(fs.readFileSync(new URL("./commands.json", import.meta.url), "utf8"))
  } catch {
    return undefined
  }
}

const args = process.argv.slice(2)
const shape = mayAskForHelp(args) ? builtShape() : undefined
if (shape !== undefined && isHelpRequest(shape, args)) {
  await parseCommandLine(programFromShape(shape), args, setExitCode)
} else {
  const { runCli } = await import("./program.ts")
  await runCli(args, setExitCode)
}
