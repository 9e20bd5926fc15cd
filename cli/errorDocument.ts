/**
 * A failed command's error as one JSON document, for `--json` runs: the API's
 * error envelope (`{statusCode, statusDetail: {status, message, code}, result}`),
 * written on stderr instead of the `error: ...` line, with the exit code
 * unchanged. `statusCode` is the status the API gives the same failure (500 for
 * an internal error); `code` is the code the API gives it (`failureCode`,
 * src/http/ApiErrors.ts; docs/api.md "Error codes"), chosen by the caller; a
 * `validation_failed` document names its problems (`statusDetail.errors`) as
 * the API's answer does: those given, else one a line of the message.
 * Nothing is imported: commander's usage errors are written through here on
 * the `--help` path.
 */

export const errorDocument = (
  statusCode: number,
  message: string,
  code: string,
  problems?: ReadonlyArray<{ readonly field: string | null; readonly message: string }>
): string => {
  const errors = code !== "validation_failed"
    ? undefined
    : problems !== undefined && problems.length > 0
    ? problems
    : message.split("\n").filter((line) => line.trim() !== "").map((line) => ({ field: null, message: line }))
  const statusDetail = { status: "ERROR", message, code, ...(errors === undefined ? {} : { errors }) }
  return `${JSON.stringify({ statusCode, statusDetail, result: {} })}\n`
}

/** `--json` anywhere before a `--` ends the options. */
export const wantsJson = (args: ReadonlyArray<string>): boolean => {
  const end = args.indexOf("--")
  return (end < 0 ? args : args.slice(0, end)).includes("--json")
}
