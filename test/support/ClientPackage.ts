/**
 * The client package (`client/`, `@billing/client`) as another project gets
 * it: its built JavaScript and declarations in `client/dist/` (made by
 * `npm ci`/`npm test` through scripts/build.mjs), and a blank project of its
 * own to install it into. For the tests that run it under plain `node`.
 */
import { execFile, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const root = fileURLToPath(new URL("../..", import.meta.url))
export const clientDirectory = path.join(root, "client")
const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc")

const newestUnder = (directory: string): number =>
  fs.readdirSync(directory, { withFileTypes: true }).reduce((newest, entry) => {
    const at = path.join(directory, entry.name)
    return Math.max(newest, entry.isDirectory() ? newestUnder(at) : fs.statSync(at).mtimeMs)
  }, 0)

/**
 * Builds client/dist/ as scripts/build.mjs does, unless it is newer than every source (a test file run alone after
 * an edit would otherwise install the last build). Two test processes may ask at once: a lock folder makes one build
 * while the other waits, then finds it fresh.
 */
export const ensureClientBuilt = async (): Promise<void> => {
  const lock = path.join(os.tmpdir(), `billing-client-build-${createHash("sha256").update(root).digest("hex").slice(0, 12)}`)
  const built = path.join(clientDirectory, "dist", "index.js")
  for (const started = Date.now();;) {
    try {
      fs.mkdirSync(lock)
      break
    } catch {
      // A build older than a few minutes was left by a process that died.
      if (Date.now() - started > 300_000) fs.rmSync(lock, { recursive: true, force: true })
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  }
  try {
    const fresh = fs.existsSync(built) &&
      fs.statSync(built).mtimeMs >= Math.max(newestUnder(path.join(clientDirectory, "src")), fs.statSync(path.join(clientDirectory, "tsconfig.json")).mtimeMs)
    if (fresh) return
    const build = spawnSync(process.execPath, [tsc, "-p", path.join(clientDirectory, "tsconfig.json")], { encoding: "utf8" })
    if (build.status !== 0) throw new Error(`the client did not build:\n${build.stdout}${build.stderr}`)
  } finally {
    fs.rmSync(lock, { recursive: true, force: true })
  }
}

/**
 * The environment of a command run as a user would: no loader or test runner options inherited (`NODE_OPTIONS`,
 * vitest's variables), npm working from its cache without the network (`npm install` of a folder or a tarball
 * needs none) and without audit or funding requests.
 */
export const plainEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (name === "NODE_OPTIONS" || name.startsWith("VITEST") || name.startsWith("npm_")) continue
    env[name] = value
  }
  return { ...env, npm_config_audit: "false", npm_config_fund: "false", npm_config_update_notifier: "false", ...extra }
}

/** Runs `command` in `cwd`; throws with its output when it fails. */
export const run = (command: string, args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv = plainEnv()) => {
  const result = spawnSync(command, args, { cwd, env, encoding: "utf8", timeout: 300_000 })
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} (in ${cwd}) exited ${result.status}:\n${result.stdout}\n${result.stderr}`)
  }
  return result.stdout
}

/**
 * `run` without blocking the test's event loop: for commands that talk to a process the test reads from (a spawned
 * `billing serve` whose output pipe must keep draining).
 */
export const runAsync = (command: string, args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv = plainEnv()) =>
  new Promise<string>((resolve, reject) => {
    execFile(command, args, { cwd, env, encoding: "utf8", timeout: 300_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error === null) resolve(stdout)
      else reject(new Error(`${command} ${args.join(" ")} (in ${cwd}) failed: ${error.message}\n${stdout}\n${stderr}`))
    })
  })

/** A new folder under the system's temporary directory. */
export const blankDirectory = (prefix: string) => fs.mkdtempSync(path.join(os.tmpdir(), prefix))
