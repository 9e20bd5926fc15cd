/**
 * A command under a pseudo-terminal, through util-linux `script` (no native
 * module to build): the command sees a TTY on stdin and stdout, keys written
 * here reach it as typed, and `script -e` exits with the command's own code.
 */
import { type ChildProcess, spawn } from "node:child_process"

export interface PtyProcess {
  readonly child: ChildProcess
  /** Everything the terminal showed so far, escape codes included. */
  readonly output: () => string
  /** Types keys into the terminal. */
  readonly type: (keys: string) => void
  /** The command's exit code (null when a signal ended it). */
  readonly exited: Promise<number | null>
  /** Ends the whole process group (script and the command under it). */
  readonly kill: () => void
}

const quote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`

export const startInPty = (argv: ReadonlyArray<string>, env: NodeJS.ProcessEnv): PtyProcess => {
  const command = argv.map(quote).join(" ")
  // A person's terminal, even when the suite itself runs in CI: with CI set, Ink
  // shows only a view's last frame (is-in-ci), so a live view would stay blank.
  const { CI: _ci, CONTINUOUS_INTEGRATION: _continuous, ...terminalEnv } = env
  // A wide terminal, so that lines are not wrapped by the pty.
  const child = spawn("script", ["-qfec", `stty cols 200 rows 50; exec ${command}`, "/dev/null"], {
    env: { ...terminalEnv, TERM: "xterm-256color" },
    detached: true,
    stdio: ["pipe", "pipe", "pipe"]
  })
  let output = ""
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  return {
    child,
    output: () => output,
    type: (keys) => child.stdin!.write(keys),
    exited,
    kill: () => {
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        // already gone
      }
    }
  }
}

/** The text a person reads: escape sequences removed. */
export const stripAnsi = (text: string) =>
  // eslint-disable-next-line no-control-regex
  text.replace(/\u001b\[[0-9;?]*[A-Za-z]|\u001b\][^\u0007]*\u0007|\r/g, "")
