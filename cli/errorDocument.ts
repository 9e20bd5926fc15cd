/**
 * A failed command's error as one JSON document, for `--json` runs: the API's
 * error envelope (`{statusCode, statusDetail: {status, message, code}, result}`),
 * written on stderr instead of the `error: ...` line, with the exit code
 * unchanged. `statusCode` is the status the API gives the same failure (500 for
 * an internal error); `code` is the failure's name in snake_case
 * (`OrganizationNotFound` → `organization_not_found`), the rule the API's
 * `statusDetail.code` follows. Nothing is imported: commander's usage errors
 * are written through here on the `--help` path.
 */

/** `ExternalIdTaken` → `external_id_taken`. */
export const codeOfTag = (tag: string): string =>
  tag.replace(/([a-z0-9])([A-Z])/g, "$1_$2").replace(/([A-Z])([A-Z][a-z])/g, "$1_$2").toLowerCase()

export const errorDocument = (statusCode: number, message: string, code: string): string =>
  `${JSON.stringify({ statusCode, statusDetail: { status: "ERROR", message, code }, result: {} })}\n`

/** `--json` anywhere before a `--` ends the options. */
export const wantsJson = (args: ReadonlyArray<string>): boolean => {
  const end = args.indexOf("--")
  return (end < 0 ? args : args.slice(0, end)).includes("--json")
}
