/**
 * How `billing serve` writes its log lines: JSON, one object a line, for a
 * process manager, a pipe or a log shipper; or one short line for a person
 * at a terminal (issue 37: raw JSON streamed under the start banner).
 * `--log-format auto` (the default) is `pretty` when stdout is a terminal and
 * `json` otherwise (docs/cli.md "billing serve's log"). Both carry the same
 * facts: the request lines' method, path, status and time, every other line's
 * level, message and annotations.
 */
import { Cause, HashMap, Inspectable, List, Logger } from "effect"

export type LogFormat = "json" | "pretty"

/** What `--log-format` and `BILLING_LOG_FORMAT` take. */
export const logFormatChoices = ["auto", "json", "pretty"] as const
export type LogFormatChoice = (typeof logFormatChoices)[number]

/** The format a choice means for a process whose stdout is, or is not, a terminal. */
export const resolveLogFormat = (choice: LogFormatChoice, stdoutIsTerminal: boolean): LogFormat =>
  choice === "auto" ? (stdoutIsTerminal ? "pretty" : "json") : choice

/** `10:39:14.355`: the local time of day, which is what a person at a terminal reads. */
const clock = (at: Date) =>
  `${String(at.getHours()).padStart(2, "0")}:${String(at.getMinutes()).padStart(2, "0")}:` +
  `${String(at.getSeconds()).padStart(2, "0")}.${String(at.getMilliseconds()).padStart(3, "0")}`

const levelWord = (level: string) => (level === "WARNING" ? "WARN" : level).padEnd(5)

const valueText = (value: unknown): string =>
  typeof value === "string" ? (/\s/.test(value) ? JSON.stringify(value) : value) : Inspectable.stringifyCircular(value)

/** `10:39:14.355 INFO  message key=value ...`. */
export const prettyLine = (level: string, message: string, annotations: Readonly<Record<string, unknown>>, at: Date) => {
  const pairs = Object.entries(annotations).map(([key, value]) => `${key}=${valueText(value)}`)
  return `${clock(at)} ${levelWord(level)} ${message}${pairs.length > 0 ? `  ${pairs.join(" ")}` : ""}`
}

/** `10:39:14.355 INFO  GET /api/v1/customers 200 3.1 ms  req=8a4c1f2e`: a finished request. */
export const prettyRequestLine = (
  level: string,
  request: { readonly requestId: string; readonly method: string; readonly url: string; readonly status: number },
  durationMs: number,
  sampled: number,
  at: Date
) =>
  `${clock(at)} ${levelWord(level)} ${request.method} ${request.url} ${request.status} ${durationMs} ms  ` +
  `req=${request.requestId.slice(0, 8)}${sampled > 0 ? ` (1 in ${sampled} logged)` : ""}`

/** The Effect logger of a format: the platform's JSON logger, or one short line a log. */
export const loggerOf = (format: LogFormat) =>
  format === "json"
    ? Logger.json
    : Logger.replace(
      Logger.defaultLogger,
      Logger.make(({ annotations, cause, date, logLevel, message, spans }) => {
        const messages = Array.isArray(message) ? message : [message]
        const words = messages.map((part) => (typeof part === "string" ? part : valueText(part))).join(" ")
        const fields: Record<string, unknown> = Object.fromEntries(HashMap.toEntries(annotations))
        for (const span of List.toArray(spans)) fields[span.label] = `${date.getTime() - span.startTime}ms`
        const line = prettyLine(logLevel.label, words, fields, date)
        globalThis.console.log(Cause.isEmpty(cause) ? line : `${line}\n${Cause.pretty(cause, { renderErrorCause: true })}`)
      })
    )
