/**
 * Prints the whole `billing` command tree as JSON (cli/helpTree.ts), for the
 * build to write beside the compiled CLI as `dist/cli/commands.json`.
 */
import { shapeOf } from "./helpTree.ts"
import { buildProgram } from "./program.ts"

process.stdout.write(`${JSON.stringify(shapeOf(await buildProgram()), null, 1)}\n`)
