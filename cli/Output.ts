/**
 * Where the CLI's output goes, decided in one place for every command.
 *
 * - `json`: `--json` was given; stdout carries exactly one JSON document.
 * - `tty`: stdout is a terminal and `NO_COLOR` is unset: colours, progress
 *   bars, live redraws, and tables truncated to the terminal's width.
 * - `plain`: anything else (a pipe, a file, `NO_COLOR`): no escape codes, one
 *   line per record, columns aligned without a width limit so nothing wraps.
 *
 * The streams, the environment and the exit code come from a `CliIo`, which is
 * the process's own unless a caller (the in-process test harness) runs a
 * command inside `withCliIo`. AsyncLocalStorage scopes it to that one run, so
 * concurrent or successive runs cannot see each other's streams or variables.
 */
import { AsyncLocalStorage } from "node:async_hooks"

export interface OutputStream {
  readonly write: (text: string) => unknown
  readonly isTTY?: boolean | undefined
  readonly columns?: number | undefined
}

export interface CliIo {
  readonly stdout: OutputStream
  readonly stderr: OutputStream
  readonly env: Readonly<Record<string, string | undefined>>
  /** Records the command's exit code (the last one set wins, as with `process.exitCode`). */
  readonly setExitCode: (code: number) => void
}

const processIo: CliIo = {
  get stdout() {
    return process.stdout
  },
  get stderr() {
    return process.stderr
  },
  get env() {
    return process.env
  },
  setExitCode: (code) => {
    process.exitCode = code
  }
}

const storage = new AsyncLocalStorage<CliIo>()

/** The streams, environment and exit code of the command running now. */
export const cliIo = (): CliIo => storage.getStore() ?? processIo

/** Runs `f` with its own streams, environment and exit code. */
export const withCliIo = <A>(io: CliIo, f: () => A): A => storage.run(io, f)

/** One environment variable of the running command. */
export const envVar = (name: string): string | undefined => cliIo().env[name]

export type OutputMode = "json" | "tty" | "plain"

/** https://no-color.org: present and not empty. */
const noColor = () => {
  const value = cliIo().env.NO_COLOR
  return value !== undefined && value !== ""
}

export const outputMode = (options: { readonly json?: boolean | undefined }): OutputMode => {
  if (options.json) return "json"
  return cliIo().stdout.isTTY === true && !noColor() ? "tty" : "plain"
}

/** Whether a person is watching: progress bars, colours and live views are for them only. */
export const isInteractive = (options: { readonly json?: boolean | undefined }): boolean =>
  outputMode(options) === "tty"

/** The width tables are fitted to in a terminal; unlimited otherwise. */
export const terminalColumns = (): number => {
  const columns = cliIo().stdout.columns
  return columns !== undefined && columns > 0 ? columns : 80
}

export const writeOut = (text: string): void => {
  cliIo().stdout.write(text)
}

export const writeErr = (text: string): void => {
  cliIo().stderr.write(text)
}

export const setExitCode = (code: number): void => cliIo().setExitCode(code)

/** Cuts `text` to `width` characters, ending with an ellipsis when it was cut. */
export const truncate = (text: string, width: number): string =>
  text.length <= width ? text : width <= 1 ? "…".slice(0, width) : `${text.slice(0, width - 1)}…`
