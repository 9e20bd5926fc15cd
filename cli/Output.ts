/**
 * Where output goes decides how it looks: live redraws and colour only on a
 * terminal (never with NO_COLOR or --json), plain lines on a pipe.
 */

export type OutputMode = "json" | "tty" | "plain"

export const outputMode = (options: { json?: boolean }): OutputMode => {
  if (options.json) return "json"
  if (process.stdout.isTTY && process.env.NO_COLOR === undefined) return "tty"
  return "plain"
}

/** A person at a terminal who can press keys: stdin and stdout are both terminals. */
export const isInteractive = (options: { json?: boolean }): boolean =>
  outputMode(options) === "tty" && process.stdin.isTTY === true
