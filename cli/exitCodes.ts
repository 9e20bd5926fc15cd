/**
 * The CLI's exit codes, one per kind of failure, so a script can tell "fix
 * your command" from "that record does not exist" without parsing stderr.
 * Domain failures take theirs from the status `src/errors.ts` gives their tag
 * (`exitCodeOfStatus`), so the CLI and the API always agree on what kind of
 * failure it was. Nothing is imported here: `billing --help` loads this module.
 *
 *   0  success
 *   1  internal error (a bug or an unreachable database)
 *   2  usage: unknown command or flag, missing argument, invalid input (400)
 *   3  not allowed: unauthorized or forbidden (401, 403)
 *   4  not found (404)
 *   5  conflict with the current state (409)
 *   6  well-formed but refused by a rule (422)
 */
export const ExitCode = {
  ok: 0,
  internal: 1,
  usage: 2,
  notAllowed: 3,
  notFound: 4,
  conflict: 5,
  refused: 6
} as const

const exitCodes: Record<400 | 401 | 403 | 404 | 409 | 422 | 429, number> = {
  400: ExitCode.usage,
  401: ExitCode.notAllowed,
  403: ExitCode.notAllowed,
  404: ExitCode.notFound,
  409: ExitCode.conflict,
  422: ExitCode.refused,
  // Rate limits apply to the API only; the CLI calls services directly and is never refused one.
  429: ExitCode.refused
}

export const exitCodeOfStatus = (status: keyof typeof exitCodes): number => exitCodes[status]
