/**
 * A failed command's error as one JSON document, for `--json` runs: the API's
 * error envelope (`{statusCode, statusDetail: {status, message, code}, result}`),
 * written on stderr instead of the `error: ...` line, with the exit code
 * unchanged. `statusCode` is the status the API gives the same failure (500 for
 * an internal error); `code` is the code the API gives it (`failureCode`,
 * src/http/ApiErrors.ts; docs/api.md "Error codes"), chosen by the caller.
 * Nothing is imported: commander's usage errors are written through here on
 * the `--help` path.
 */

export const errorDocument = (statusCode: number, message: string, code: string): string =>
  `${JSON.stringify({ statusCode, statusDetail: { status: "ERROR", message, code }, result: {} })}\n`

/** `--json` anywhere before a `--` ends the options. */
export const wantsJson = (args: ReadonlyArray<string>): boolean => {
  const end = args.indexOf("--")
  return (end < 0 ? args : args.slice(0, end)).includes("--json")
}
