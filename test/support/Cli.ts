/**
 * The `billing` CLI as a child process, like `TestApp.cli`, but the result
 * also says which signal ended the process: a crash test must tell a SIGKILL
 * at its fault point from any other failure (a refused connection, a broken
 * build, an unsettled top-level await exiting 13), which an exit code alone
 * does not.
 */
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { HANG_GUARD_MS } from "./Eventually.ts"
import type { TestApp } from "./TestApp.ts"

const cliPath = fileURLToPath(new URL("../../bin/billing.mjs", import.meta.url))

export interface CliExit {
  /** The exit code; null when a signal ended the process. */
  readonly code: number | null
  /** The signal that ended the process, if one did. */
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
  /** stdout parsed as JSON, when it is. */
  readonly json: any
}

/** Runs `billing ...args` on the app's database; at most `timeoutMs`, then SIGTERM. */
export const runCli = (
  app: Pick<TestApp, "databaseUrl">,
  args: ReadonlyArray<string>,
  env: Record<string, string> = {},
  options: { readonly timeoutMs?: number } = {}
): Promise<CliExit> => spawnBilling(args, { ...process.env, DATABASE_URL: app.databaseUrl, ...env }, options)

/** Runs `billing ...args` in exactly the environment given (the embedded database's tests leave DATABASE_URL out). */
export const spawnBilling = (
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv,
  { timeoutMs = HANG_GUARD_MS }: { readonly timeoutMs?: number } = {}
): Promise<CliExit> =>
  new Promise((resolve) => {
    const child = execFile(process.execPath, [cliPath, ...args], { env, timeout: timeoutMs }, (_error, stdout, stderr) => {
      let json: unknown
      try {
        json = JSON.parse(stdout)
      } catch {
        json = undefined
      }
      resolve({ code: child.exitCode, signal: child.signalCode, stdout, stderr, json })
    })
  })

/** A one-line account of how the process ended, for assertion messages. */
export const describeExit = (exit: CliExit) =>
  `exit code ${exit.code}, signal ${exit.signal}\nstdout: ${exit.stdout}\nstderr: ${exit.stderr}`
