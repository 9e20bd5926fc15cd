/**
 * How every CLI command runs: build the services it calls on the environment's
 * database (the embedded one joins a running `billing serve`), run one effect,
 * print either exactly one JSON document (`--json`) or an Ink view, and exit
 * non-zero with a message on stderr when it fails.
 *
 * A command builds only what it uses: each command module names the services
 * its commands call (`runnerOn`), and a run builds those, their own
 * dependencies and `CommandBase`, not the whole service graph (no inbox writer
 * fibers for `billing customer list`), and loads only their modules.
 */
import { Cause, ConfigProvider, Effect, Exit, Layer, Logger, LogLevel, ManagedRuntime, Option, ParseResult, Schema } from "effect"
import { type Command, InvalidArgumentError } from "commander"
import * as fs from "node:fs"
import type { ReactElement } from "react"
import { BadRequest, edgeCode, failureCode, failureProblems, failureStatus } from "../src/http/ApiErrors.ts"
import { codeOf } from "../src/errors.ts"
import { Organizations } from "../src/organizations/Organizations.ts"
import { acceptDecimalText } from "../src/schema.ts"
import { MigratedDatabaseLive } from "../src/db/Migrations.ts"
import { ApiKeys } from "../src/organizations/ApiKeys.ts"
import { TelemetryLive } from "../src/Telemetry.ts"
import { activeCommand } from "./activeCommand.ts"
import { ExitCode, exitCodeOfStatus } from "./exitCodes.ts"
import { describeInputIssues } from "./inputErrors.ts"
import { cliIo, envVar, outputMode, setExitCode, writeErr, writeOut } from "./Output.ts"
import { commandDatabase, createdNote, whereLooked } from "./databaseNote.ts"
import { errorDocument } from "./errorDocument.ts"

/**
 * What every command stands on: the environment's database, migrated before a
 * command uses it (a new database works from its first command), and the
 * organisation check of `organizationOf`.
 */
const CommandBaseLive = Organizations.Default.pipe(
  Layer.provideMerge(ApiKeys.Default),
  Layer.provideMerge(MigratedDatabaseLive)
)
export type CommandBase = Layer.Layer.Success<typeof CommandBaseLive>

export interface CommonOptions {
  readonly json?: boolean
  readonly org?: string
}

/** Warnings and errors only, on stderr: stdout carries the command's one JSON document. */
const quiet = Layer.merge(
  Logger.minimumLogLevel(LogLevel.Warning),
  Logger.replace(
    Logger.defaultLogger,
    Logger.map(Logger.logfmtLogger, (line) => writeErr(`${line}\n`))
  )
)

/**
 * The command's configuration (DATABASE_URL, BILLING_DATA_DIR, ...) read from
 * the running command's environment, not necessarily `process.env`: an
 * in-process run passes its own.
 */
export const environmentConfig = () => {
  const env = cliIo().env
  const entries = Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined)
  return Layer.setConfigProvider(ConfigProvider.fromMap(new Map(entries)))
}

const describeFailure = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    if (failureStatus(error) !== undefined) return (error as { readonly message: string }).message
    if (ParseResult.isParseError(error)) {
      return describeInputIssues(ParseResult.ArrayFormatter.formatErrorSync(error), activeCommand()).join("\n  ")
    }
    if (error instanceof Error) return error.message
    return String(error)
  }
  const defect = Cause.squash(cause)
  return defect instanceof Error ? `internal error: ${defect.message}` : `internal error: ${String(defect)}`
}

const failureTag = (cause: Cause.Cause<unknown>): string | undefined => {
  const failure = Cause.failureOption(cause)
  const value = Option.isSome(failure) ? failure.value : Cause.squash(cause)
  return typeof value === "object" && value !== null ? (value as { readonly _tag?: string })._tag : undefined
}

/** `--org` named no organisation: the answer says which database was looked in. */
const isOrganizationNotFound = (cause: Cause.Cause<unknown>) => failureTag(cause) === "OrganizationNotFound"

/** The database could not be reached at all (nothing was created). */
const isConnectFailure = (cause: Cause.Cause<unknown>) => failureTag(cause) === "SqlError"

/** The status the API would answer the failure with: 500 for a defect. */
const statusOfCause = (cause: Cause.Cause<unknown>): number => {
  const failure = Cause.failureOption(cause)
  if (Option.isNone(failure)) return 500
  const status = failureStatus(failure.value)
  if (status !== undefined) return status
  return ParseResult.isParseError(failure.value) ? 400 : 500
}

/**
 * `statusDetail.code` of a `--json` error: the code the API answers the same
 * failure with (`failureCode`, src/http/ApiErrors.ts: a service error's
 * `codeOf` its tag, an edge error's own code); input that does not decode is
 * `validation_failed`, anything else `internal_error`.
 */
const codeOfCause = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  if (Option.isNone(failure)) return edgeCode("InternalError")
  if (ParseResult.isParseError(failure.value)) return codeOf("ValidationFailed")
  return failureCode(failure.value) ?? edgeCode("InternalError")
}

/** The problems a failure names with their fields (a service's `ValidationFailed`); undefined for any other. */
const problemsOfCause = (cause: Cause.Cause<unknown>) =>
  Option.getOrUndefined(Option.flatMapNullable(Cause.failureOption(cause), failureProblems))

/** The exit code of a failed command (cli/exitCodes.ts): from the failure's tag, 1 for a defect. */
const exitCodeOfCause = (cause: Cause.Cause<unknown>): number => {
  const failure = Cause.failureOption(cause)
  if (Option.isNone(failure)) return ExitCode.internal
  const status = failureStatus(failure.value)
  if (status !== undefined) return exitCodeOfStatus(status)
  if (ParseResult.isParseError(failure.value)) return ExitCode.usage
  return ExitCode.internal
}

export interface Presenter<A> {
  /** The one JSON document printed with `--json`. */
  readonly json: (value: A) => unknown
  /** What a person sees. */
  readonly view: (value: A) => ReactElement
}

/**
 * Tells a failed long-running command's failure (the worker loop, `listen`), as
 * `runOn` tells any command's: `error: ...`, or with `--json` one JSON document.
 */
export const writeFailure = (options: CommonOptions, cause: Cause.Cause<unknown>): void => {
  const message = describeFailure(cause)
  writeErr(
    outputMode(options) === "json"
      ? errorDocument(statusOfCause(cause), message, codeOfCause(cause), problemsOfCause(cause))
      : `error: ${message}\n`
  )
}

/** Runs one command's effect on `CommandBase` and what its module builds on it. */
export type Runner<R> = <A>(
  options: CommonOptions,
  effect: Effect.Effect<A, unknown, R | CommandBase>,
  presenter: Presenter<A>
) => Promise<void>

/** The `run` of the commands that call `services` (built on `CommandBase`, per run). */
export const runnerOn = <R, E>(services: Layer.Layer<R, E, CommandBase>): Runner<R> => {
  const layer = services.pipe(Layer.provideMerge(CommandBaseLive))
  return (options, effect, presenter) => runOn(layer, options, effect, presenter)
}

/** The `run` of commands that call only `CommandBase` (organisations and their keys). */
export const run: Runner<never> = runnerOn(Layer.empty)

/** `run` on a layer of the command's choosing (`billing migrate` needs the bare database). */
export const runOn = async <A, R>(
  layer: Layer.Layer<R, unknown>,
  options: CommonOptions,
  effect: Effect.Effect<A, unknown, R>,
  presenter: Presenter<A>
): Promise<void> => {
  // Read before the database is opened: an embedded folder is created by opening it.
  const database = commandDatabase(cliIo().env)
  const runtime = ManagedRuntime.make(
    layer.pipe(Layer.provide(quiet), Layer.provide(TelemetryLive), Layer.provide(environmentConfig()))
  )
  const exit = await runtime.runPromiseExit(effect)
  await runtime.dispose()
  // A `--json` failure is one JSON document on stderr: there the note is in its message (`whereLooked`).
  const failedJson = Exit.isFailure(exit) && outputMode(options) === "json"
  if (database.createdNow && !failedJson && !(Exit.isFailure(exit) && isConnectFailure(exit.cause))) {
    writeErr(`${createdNote(database)}\n`)
  }
  if (Exit.isSuccess(exit)) {
    if (outputMode(options) === "json") {
      writeOut(`${JSON.stringify(presenter.json(exit.value), null, 2)}\n`)
    } else {
      // Ink is loaded only for a view: a --json command, and the worker on a pipe, never need it.
      const { renderView } = await import("./ui/renderView.ts")
      writeOut(`${renderView(presenter.view(exit.value))}\n`)
    }
    return
  }
  const notFoundWhere = isOrganizationNotFound(exit.cause) || (database.createdNow && outputMode(options) === "json" && !isConnectFailure(exit.cause))
    ? whereLooked(database)
    : ""
  const message = `${describeFailure(exit.cause)}${notFoundWhere}`
  writeErr(
    outputMode(options) === "json"
      ? errorDocument(statusOfCause(exit.cause), message, codeOfCause(exit.cause), problemsOfCause(exit.cause))
      : `error: ${message}\n`
  )
  setExitCode(exitCodeOfCause(exit.cause))
}

/** The organisation a command acts for: `--org`, else `BILLING_ORG`; it must exist. */
export const organizationOf = (options: CommonOptions) =>
  Effect.gen(function*() {
    const id = options.org ?? envVar("BILLING_ORG")
    if (!id) return yield* new BadRequest({ message: "no organisation: pass --org ID or set BILLING_ORG" })
    const organization = yield* Effect.flatMap(Organizations, (organizations) => organizations.get(id))
    return organization.id
  })

/** Encodes a domain value for `--json` with the same schema the API uses. */
export const encode = <A, I>(schema: Schema.Schema<A, I>) => (value: A): I => Schema.encodeSync(schema)(value)

/** Reads a JSON or YAML request body from `--file`. */
export const readBodyFile = (file: string): Effect.Effect<unknown, BadRequest> =>
  Effect.tryPromise({
    try: async () => {
      const text = fs.readFileSync(file, "utf8")
      if (!/\.ya?ml$/i.test(file)) return JSON.parse(text)
      const { default: YAML } = await import("yaml")
      return YAML.parse(text)
    },
    catch: (error) => new BadRequest({ message: `cannot read ${file}: ${(error as Error).message}` })
  })

/**
 * Decodes CLI input with the same schema the HTTP API uses. Failures are told
 * one line per problem, naming the running command's flags (cli/inputErrors.ts);
 * `name` names a bare value that is not a field of a body (`--status`).
 */
export const decodeInput = <A, I>(schema: Schema.Schema<A, I>, input: unknown, name?: string): Effect.Effect<A, BadRequest> =>
  Effect.mapError(
    acceptDecimalText(Schema.decodeUnknown(schema, { errors: "all" })(input)),
    (error) => {
      const lines = describeInputIssues(ParseResult.ArrayFormatter.formatErrorSync(error), activeCommand(), name)
      return new BadRequest({ message: lines.length === 1 ? lines[0]! : `invalid input:\n${lines.map((line) => `  ${line}`).join("\n")}` })
    }
  )

/** The body of a create or update: `--file`, with any flags set on top of it. */
export const bodyOf = (options: { readonly file?: string }, flags: Record<string, unknown>) =>
  Effect.map(
    options.file ? readBodyFile(options.file) : Effect.succeed({}),
    (fromFile) => ({
      ...(fromFile as object),
      ...Object.fromEntries(Object.entries(flags).filter(([, value]) => value !== undefined))
    })
  )

/** Adds `--json` and `--org` to a command that acts for one organisation. */
export const withOrg = (command: Command) =>
  command.option("--json", "print one JSON document").option("--org <id>", "organisation id (default: $BILLING_ORG)")

export const withJson = (command: Command) => command.option("--json", "print one JSON document")

/** A number flag: commander hands over text. */
export const numberFlag = (value: string): number => {
  const number = Number(value)
  if (value.trim() === "" || !Number.isFinite(number)) throw new InvalidArgumentError(`not a number: ${value}`)
  return number
}

/** A flag whose value is JSON (`--model-bundle '[{"modelId": ...}]'`). */
export const jsonFlag = (value: string): unknown => {
  try {
    return JSON.parse(value)
  } catch {
    throw new InvalidArgumentError(`not valid JSON: ${value}`)
  }
}
