import { NodeRuntime } from "@effect/platform-node"
import type { Command } from "commander"
import { Effect, Layer, Logger } from "effect"
import { runMigrations } from "../../src/db/Migrations.ts"
import { makeHttpServer } from "../../src/http/Server.ts"
import { DatabaseLive } from "../../src/db/Database.ts"
import { AppServicesLive } from "../../src/Services.ts"
import { Text } from "ink"
import { workerJobs } from "../../src/worker/Jobs.ts"
import { pollInterval, runWorker } from "../../src/worker/Worker.ts"
import { numberFlag, runOn, withJson } from "../run.ts"

export const registerServe = (program: Command) => {
  program
    .command("serve")
    .description("run the REST API at http://HOST:PORT/api/v1, with the worker loop in the same process")
    .option("--port <port>", "port (default: $PORT or 8787)", numberFlag)
    .option("--host <host>", "interface to listen on (default: $HOST or 127.0.0.1)")
    .option("--no-worker", "do not run the worker loop in this process")
    .action((options: { port?: number; host?: string; worker: boolean }) => {
      const port = options.port ?? Number(process.env.PORT ?? 8787)
      const host = options.host ?? process.env.HOST ?? "127.0.0.1"
      const worker = options.worker
        ? Layer.scopedDiscard(Effect.forkScoped(runWorker(workerJobs, { once: false, idle: pollInterval() })))
        : Layer.empty
      const server = Layer.merge(makeHttpServer({ port, host }), worker).pipe(
        Layer.provide(AppServicesLive),
        Layer.provide(Logger.json)
      )
      // SIGTERM and SIGINT interrupt the layer: the server stops accepting,
      // in-flight requests finish, then the pool and the embedded database close.
      NodeRuntime.runMain(Layer.launch(server), { disablePrettyLogger: true })
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
