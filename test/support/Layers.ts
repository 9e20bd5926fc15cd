/**
 * Test layers for services tested without the HTTP round trip: a fresh,
 * migrated database of the test file's own (real PostgreSQL with DATABASE_URL,
 * the embedded one without), and the services under test on it.
 */
import { Layer, Logger, LogLevel } from "effect"
import { withArrivalsAnswered } from "../../src/app/CustomersLive.ts"
import { MigrationsLive } from "../../src/db/Migrations.ts"
import { Ledger } from "../../src/ledger/Ledger.ts"
import { TestDatabaseLive } from "./TestDatabase.ts"

export const MigratedTestDatabase = Layer.provideMerge(MigrationsLive, TestDatabaseLive).pipe(
  Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
)

/**
 * The services a test names (their `Default`s, which bring what they depend
 * on), on a migrated test database, with customers' arrivals answered as in
 * production: `onTestDatabase(Layer.merge(Plans.Default, Purchases.Default))`.
 * The test gets the database too, to look at the rows.
 */
export const onTestDatabase = <A, E, R>(services: Layer.Layer<A, E, R>) =>
  withArrivalsAnswered(services).pipe(Layer.provideMerge(MigratedTestDatabase))

/** The ledger (and the outbox it writes events through), on a test database. */
export const LedgerTest = onTestDatabase(Ledger.Default)
