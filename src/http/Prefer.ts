/**
 * The `Prefer` request header (RFC 7240), as far as the API honours it: the
 * `wait` preference (docs/api.md "Waiting for the price").
 *
 * RFC 7240 asks a server to ignore a preference it does not understand or
 * cannot apply, and never to fail a request for one. So a malformed header,
 * a `wait` that is not a whole number of seconds, or `wait=0` is as if no
 * `wait` were sent; a `wait` above `maxWaitSeconds` is applied as
 * `maxWaitSeconds` (and `Preference-Applied` says so). Of several `wait`
 * preferences, the first counts (RFC 7240 §2).
 */

/** The longest a request may ask to wait, in seconds. */
export const maxWaitSeconds = 10

/** The response header naming the preferences applied. */
export const preferenceAppliedHeader = "preference-applied"

/** `token [= word] *(; parameter)`: the preference's name and value, parameters dropped. */
const preferenceOf = (text: string): readonly [string, string | undefined] => {
  const head = text.split(";", 1)[0]!
  const equals = head.indexOf("=")
  if (equals < 0) return [head.trim().toLowerCase(), undefined]
  let value = head.slice(equals + 1).trim()
  if (value.length >= 2 && value.startsWith("\"") && value.endsWith("\"")) value = value.slice(1, -1)
  return [head.slice(0, equals).trim().toLowerCase(), value]
}

/**
 * The seconds the `wait` preference of `header` asks for, at most
 * `maxWaitSeconds`; undefined when there is none to apply.
 */
export const waitPreference = (header: string | undefined): number | undefined => {
  if (header === undefined) return undefined
  for (const part of header.split(",")) {
    const [name, value] = preferenceOf(part)
    if (name !== "wait") continue
    if (value === undefined || !/^\d{1,9}$/.test(value)) return undefined
    const seconds = Number(value)
    return seconds === 0 ? undefined : Math.min(seconds, maxWaitSeconds)
  }
  return undefined
}
