#!/usr/bin/env node
/**
 * Compiles the doors (the `billing` CLI with the API server, and the worker)
 * into `dist/` with esbuild, so no process compiles TypeScript when it starts.
 * Dependencies are bundled in too: resolving and loading hundreds of package
 * files is most of a cold start. `npm ci` runs it (`prepare`), and so does
 * `npm test`; `bin/billing.mjs` falls back to tsx when a source is newer than
 * the build, so a stale build never runs.
 *
 * It also builds the typed client package (client/, `@billing/client`) with tsc.
 *
 * Kept out of the bundle: PGlite and its socket server (they load their WASM
 * and data files from their own package folders), optional native modules,
 * and `pg` (a few files; kept shared so that tools such as the benchmarks'
 * statement counter can wrap its client).
 */
import * as esbuild from "esbuild"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const outdir = `${root}dist`

fs.rmSync(outdir, { recursive: true, force: true })
await esbuild.build({
  absWorkingDir: root,
  entryPoints: {
    "cli/main": "cli/main.ts",
    "cli/describe": "cli/describe.ts",
    "cli/prepareEmbedded": "cli/prepareEmbedded.ts",
    "worker/main": "worker/main.ts"
  },
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  jsx: "automatic",
  sourcemap: "linked",
  legalComments: "none",
  logLevel: "warning",
  // React and Ink pick their production builds (react-reconciler's development
  // build alone is 1 MB that every command would parse at start).
  define: { "process.env.NODE_ENV": "\"production\"" },
  external: ["@electric-sql/pglite", "@electric-sql/pglite-socket", "react-devtools-core", "pg", "pg-native", "deno"],
  // Bundled CommonJS packages call require(); ESM output has none of its own.
  banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" }
})
const runBuilt = (entry) => {
  const result = spawnSync(process.execPath, [`${outdir}/${entry}.js`], { encoding: "utf8" })
  if (result.status !== 0) throw new Error(`${entry} failed: ${result.stderr}`)
  return result.stdout
}
// The command tree for `billing --help`, which then loads none of the commands (cli/helpTree.ts).
fs.writeFileSync(`${outdir}/cli/commands.json`, runBuilt("cli/describe"))
// A new embedded database's cluster, copied instead of running initdb; kept across builds (src/db/EmbeddedTemplate.ts).
// Only a head start: without it a new database runs initdb, so a failure here warns and the build goes on.
try {
  runBuilt("cli/prepareEmbedded")
} catch (error) {
  process.stderr.write(`warning: no embedded cluster template (new embedded databases will run initdb): ${error.message}\n`)
}
// The typed client, its own package (client/package.json): JavaScript and declarations in client/dist/, by the
// repository's TypeScript. Its generated sources are checked in (scripts/generate-client.ts writes them).
// An install without dev dependencies (`npm ci --omit=dev`) has no TypeScript: the service builds, the client is skipped.
let tsc
try {
  tsc = fileURLToPath(import.meta.resolve("typescript/bin/tsc"))
} catch {
  process.stderr.write("warning: TypeScript is not installed (dev dependencies omitted): the client (client/) is not built\n")
}
if (tsc !== undefined) {
  const client = spawnSync(process.execPath, [tsc, "-p", `${root}client/tsconfig.json`], { encoding: "utf8" })
  if (client.status !== 0) throw new Error(`the client (client/) did not build:\n${client.stdout}${client.stderr}`)
}
// Written last: its time is what `bin/billing.mjs` compares the sources with.
fs.writeFileSync(`${outdir}/BUILD`, `${new Date().toISOString()}\n`)
