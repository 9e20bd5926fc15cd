/**
 * Test layers for services tested without the HTTP round trip: a fresh,
 * migrated database of the test file's own (real PostgreSQL with DATABASE_URL,
 * the embedded one without), and the service under test on it.
 */
import { Layer, Logger, LogLevel } from "effect"
import { MigrationsLive } from "../../src/db/Migrations.ts"
import { Ledger } from "../../src/ledger/Ledger.ts"
import { WebhookOutbox } from "../../src/webhooks/Outbox.ts"
import { TestDatabaseLive } from "./TestDatabase.ts"

export const MigratedTestDatabase = Layer.provideMerge(MigrationsLive, TestDatabaseLive).pipe(
  Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
)

/** The ledger and the outbox it writes events through, on a test database. */
export const LedgerTest = Ledger.Default.pipe(
  Layer.provideMerge(WebhookOutbox.Default),
  Layer.provideMerge(MigratedTestDatabase)
)
