/**
 * `billing`: the operator CLI. Commander parses; Ink shows; every command calls
 * the same services as the API (never the API itself). See DESIGN.md §8 for the
 * stable forms that scripts rely on, and cli/program.ts for the command tree.
 */
import { setExitCode } from "./Output.ts"
import { runCli } from "./program.ts"

// `billing ... | head` closes the pipe early: that is the reader's choice, not a failure.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0)
  throw error
})

await runCli(process.argv.slice(2), setExitCode)
