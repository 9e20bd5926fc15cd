import { type Command, InvalidArgumentError } from "commander"
import { Text } from "../ui/ink.ts"
import { DatabaseLive } from "../../src/db/Database.ts"
import { runMigrations } from "../../src/db/Migrations.ts"
import { numberFlag, runOn, withJson } from "../run.ts"
import type { ServeOptions } from "./serveRun.tsx"
import { type LogFormatChoice, logFormatChoices } from "../../src/http/LogFormat.ts"

const logFormatFlag = (value: string): LogFormatChoice => {
  if (!(logFormatChoices as ReadonlyArray<string>).includes(value)) {
    throw new InvalidArgumentError(`must be one of ${logFormatChoices.join(", ")} (got "${value}")`)
  }
  return value as LogFormatChoice
}

const processesFlag = (value: string): number => {
  const number = numberFlag(value)
  if (!Number.isInteger(number) || number < 1) throw new InvalidArgumentError(`not a whole number of 1 or more: ${value}`)
  return number
}

export const registerServe = (program: Command) => {
  program
    .command("serve")
    .description("run the REST API at http://HOST:PORT/api/v1, with the worker loop in the same process")
    .option("--port <port>", "port (default: $PORT or 8787)", numberFlag)
    .option("--host <host>", "interface to listen on (default: $HOST or 127.0.0.1)")
    .option("--no-worker", "do not run the worker loop in this process")
    .option("--processes <n>", "API processes sharing the port (default 1); the worker loop runs once, in the primary", processesFlag)
    .option(
      "--log-format <format>",
      "log lines as json or pretty (one short line each); auto: pretty on a terminal, json otherwise " +
        "(default: $BILLING_LOG_FORMAT or auto)",
      logFormatFlag
    )
    .action(async (options: ServeOptions, command: Command) => {
      const fromEnvironment = process.env.BILLING_LOG_FORMAT
      if (options.logFormat === undefined && fromEnvironment !== undefined && fromEnvironment !== "") {
        try {
          options = { ...options, logFormat: logFormatFlag(fromEnvironment) }
        } catch (error) {
          command.error(`error: BILLING_LOG_FORMAT ${(error as Error).message}`)
        }
      }
      // Loaded here, not at the top: only `serve` pays for the HTTP server's code.
      const { runServe } = await import("./serveRun.tsx")
      runServe(program, options)
    })

  withJson(program.command("migrate").description("apply pending database migrations"))
    .action((options: { json?: boolean }) =>
      runOn(
        DatabaseLive,
        options,
        runMigrations,
        {
          json: (applied) => ({ applied: applied.map(([id, name]) => ({ id, name })) }),
          view: (applied) => <Text>{applied.length === 0 ? "Database is up to date." : `Applied ${applied.map(([id, name]) => `${id}_${name}`).join(", ")}`}</Text>
        }
      )
    )
}
