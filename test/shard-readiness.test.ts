/**
 * Ready to shard (docs/scaling.md): in every tenant table the
 * primary key, every unique (or exclusion) index, partial ones included, and
 * every foreign key lead with organization_id, and a foreign key pairs it with
 * the referenced table's organization_id. That is what lets Citus distribute
 * every tenant table by organization_id, co-located, without a rewrite.
 *
 * The test migrates a fresh database and reads the catalogue (pg_class,
 * pg_index, pg_constraint, pg_attribute, information_schema.columns); a failure
 * lists every table, index and constraint that breaks the rule. Partitioned
 * tables are checked like any table, and so is each of their partitions (the
 * usage log's months), which belong to their root table's kind.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { MigrationsLive } from "../src/db/Migrations.ts"
import { TestDatabaseLive } from "./support/TestDatabase.ts"

const TENANT_COLUMN = "organization_id"

/** Tables that are not tenant data at all; nothing is checked on them. */
const NOT_TENANT_TABLES: Readonly<Record<string, string>> = {
  // The tenants themselves: `id` is the organisation id. On Citus it is
  // distributed by `id`, co-located with every tenant table, so that the
  // `organization_id REFERENCES organizations (id)` keys stay shard-local.
  organizations: "the tenant root; distributed by its own id",
  // The @effect/sql Migrator's bookkeeping. Migrations run on the Citus
  // coordinator, where this stays an ordinary local table.
  schema_migrations: "the migrator's bookkeeping; a local table on the coordinator"
}

/**
 * Citus reference tables: global by nature (no organisation owns a row), small,
 * replicated to every node. They may have keys of any shape, and tenant tables
 * may reference them by any column; they must not reference a tenant table
 * (Citus has no foreign key from a reference table to a distributed one).
 *
 * Empty today: every table of the service belongs to one organisation (even the
 * model rate card is per organisation, `models.built_in` marks the seeded rows).
 * A table added here needs the reason it is global, and a line in
 * docs/scaling.md's list of reference tables.
 */
const REFERENCE_TABLES: Readonly<Record<string, string>> = {}

const TableRow = Schema.Struct({
  tableName: Schema.String,
  rootName: Schema.String,
  isPartition: Schema.Boolean,
  tenantColumnNullable: Schema.NullOr(Schema.String),
  hasPrimaryKey: Schema.Boolean
})

const UniqueIndexRow = Schema.Struct({
  tableName: Schema.String,
  rootName: Schema.String,
  indexName: Schema.String,
  isPrimary: Schema.Boolean,
  isPartial: Schema.Boolean,
  isExclusion: Schema.Boolean,
  firstColumn: Schema.String,
  definition: Schema.String
})

const ForeignKeyRow = Schema.Struct({
  tableName: Schema.String,
  rootName: Schema.String,
  constraintName: Schema.String,
  columns: Schema.Array(Schema.String),
  referencedTable: Schema.String,
  referencedRoot: Schema.String,
  referencedColumns: Schema.Array(Schema.String)
})

/** Every row of `query`, decoded by `schema` (a row that does not decode is a bug of the test). */
const findAll = <A, I>(schema: Schema.Schema<A, I>, query: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>) =>
  Effect.orDie(Effect.flatMap(query, Schema.decodeUnknown(Schema.Array(schema))))

type Kind = "not-tenant" | "reference" | "tenant"

const kindOf = (root: string): Kind =>
  root in NOT_TENANT_TABLES ? "not-tenant" : root in REFERENCE_TABLES ? "reference" : "tenant"

/** How a table is named in a violation: a partition says whose it is. */
const label = (table: string, root: string) => (table === root ? table : `${table} (partition of ${root})`)

interface ShardReport {
  /** Every table and partition looked at, with its root table. */
  readonly tables: ReadonlyArray<typeof TableRow.Type>
  /** One line per table, index or constraint that breaks the rule. */
  readonly violations: ReadonlyArray<string>
}

/** Reads the catalogue of `schema` and names everything that would stop it being distributed by organization_id. */
const shardReadiness = (schema: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const tables = yield* findAll(
      TableRow,
      sql`SELECT c.relname AS table_name,
                 coalesce(r.relname, c.relname) AS root_name,
                 c.relispartition AS is_partition,
                 col.is_nullable::text AS tenant_column_nullable,
                 EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary) AS has_primary_key
          FROM pg_class c
          JOIN pg_namespace n ON n.oid = c.relnamespace
          LEFT JOIN pg_class r ON r.oid = pg_partition_root(c.oid)
          LEFT JOIN information_schema.columns col
            ON col.table_schema = n.nspname AND col.table_name = c.relname AND col.column_name = ${TENANT_COLUMN}
          WHERE n.nspname = ${schema} AND c.relkind IN ('r', 'p')
          ORDER BY c.relname`
    )
    // Unique and exclusion indexes, constraint-backed or not, partial or not,
    // on partitioned tables (their partitioned index) and on each partition.
    const uniqueIndexes = yield* findAll(
      UniqueIndexRow,
      sql`SELECT t.relname AS table_name,
                 coalesce(r.relname, t.relname) AS root_name,
                 ic.relname AS index_name,
                 i.indisprimary AS is_primary,
                 i.indpred IS NOT NULL AS is_partial,
                 i.indisexclusion AS is_exclusion,
                 pg_get_indexdef(i.indexrelid, 1, true) AS first_column,
                 pg_get_indexdef(i.indexrelid) AS definition
          FROM pg_index i
          JOIN pg_class t ON t.oid = i.indrelid
          JOIN pg_namespace n ON n.oid = t.relnamespace
          JOIN pg_class ic ON ic.oid = i.indexrelid
          LEFT JOIN pg_class r ON r.oid = pg_partition_root(t.oid)
          WHERE n.nspname = ${schema} AND t.relkind IN ('r', 'p') AND (i.indisunique OR i.indisexclusion)
          ORDER BY t.relname, ic.relname`
    )
    const foreignKeys = yield* findAll(
      ForeignKeyRow,
      sql`SELECT t.relname AS table_name,
                 coalesce(r.relname, t.relname) AS root_name,
                 con.conname AS constraint_name,
                 ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
                       JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
                       ORDER BY k.ord) AS columns,
                 rt.relname AS referenced_table,
                 coalesce(rr.relname, rt.relname) AS referenced_root,
                 ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, ord)
                       JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum
                       ORDER BY k.ord) AS referenced_columns
          FROM pg_constraint con
          JOIN pg_class t ON t.oid = con.conrelid
          JOIN pg_namespace n ON n.oid = t.relnamespace
          JOIN pg_class rt ON rt.oid = con.confrelid
          LEFT JOIN pg_class r ON r.oid = pg_partition_root(t.oid)
          LEFT JOIN pg_class rr ON rr.oid = pg_partition_root(rt.oid)
          WHERE con.contype = 'f' AND n.nspname = ${schema}
          ORDER BY t.relname, con.conname`
    )

    const violations: Array<string> = []
    const present = new Set(tables.map((table) => table.tableName))
    for (const name of Object.keys(REFERENCE_TABLES)) {
      if (!present.has(name)) violations.push(`REFERENCE_TABLES lists ${name}, which does not exist`)
    }

    // A tenant table without the column is reported once, not once per key.
    const withoutColumn = new Set<string>()
    for (const table of tables) {
      if (kindOf(table.rootName) !== "tenant") continue
      const name = label(table.tableName, table.rootName)
      if (table.tenantColumnNullable === null) {
        withoutColumn.add(table.tableName)
        violations.push(
          `${name}: no ${TENANT_COLUMN} column (add it and lead every key with it, ` +
            `or list the table in REFERENCE_TABLES with the reason it is global)`
        )
        continue
      }
      if (table.tenantColumnNullable !== "NO") violations.push(`${name}: ${TENANT_COLUMN} may be NULL`)
      if (!table.hasPrimaryKey) violations.push(`${name}: no primary key (it must lead with ${TENANT_COLUMN})`)
    }

    for (const index of uniqueIndexes) {
      if (kindOf(index.rootName) !== "tenant" || withoutColumn.has(index.tableName)) continue
      if (index.firstColumn === TENANT_COLUMN) continue
      const what = index.isPrimary
        ? "primary key"
        : `${index.isPartial ? "partial " : ""}${index.isExclusion ? "exclusion" : "unique"} index`
      violations.push(
        `${label(index.tableName, index.rootName)}: ${what} ${index.indexName} leads with ${index.firstColumn}, ` +
          `not ${TENANT_COLUMN} (${index.definition})`
      )
    }

    for (const key of foreignKeys) {
      const kind = kindOf(key.rootName)
      const referencedKind = kindOf(key.referencedRoot)
      const name = label(key.tableName, key.rootName)
      const shape = `(${key.columns.join(", ")}) -> ${key.referencedTable} (${key.referencedColumns.join(", ")})`
      if (kind === "not-tenant" || withoutColumn.has(key.tableName)) continue
      if (kind === "reference") {
        if (referencedKind !== "reference") {
          violations.push(
            `${name}: reference table's foreign key ${key.constraintName} ${shape} ` +
              `targets a table that is not a reference table (Citus cannot enforce it)`
          )
        }
        continue
      }
      // A tenant table may reference a reference table by any column.
      if (referencedKind === "reference") continue
      if (key.referencedRoot === "organizations") {
        if (key.columns.length !== 1 || key.columns[0] !== TENANT_COLUMN || key.referencedColumns[0] !== "id") {
          violations.push(
            `${name}: foreign key ${key.constraintName} ${shape} must be (${TENANT_COLUMN}) -> organizations (id)`
          )
        }
        continue
      }
      if (referencedKind === "not-tenant") {
        violations.push(`${name}: foreign key ${key.constraintName} ${shape} references a table that is not tenant data`)
        continue
      }
      if (key.columns[0] !== TENANT_COLUMN || key.referencedColumns[0] !== TENANT_COLUMN) {
        violations.push(
          `${name}: foreign key ${key.constraintName} ${shape} must lead with ${TENANT_COLUMN} on both sides`
        )
      }
    }
    return { tables, violations } satisfies ShardReport
  })

const MigratedDatabase = Layer.provideMerge(MigrationsLive, TestDatabaseLive)

layer(MigratedDatabase, { timeout: "120 seconds", excludeTestServices: true })("shard readiness", (it) => {
  it.effect("every key of every tenant table leads with organization_id", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ schema: string }>`SELECT current_schema() AS schema`
      const report = yield* shardReadiness(rows[0]!.schema)
      expect(report.violations).toEqual([])

      // The check saw the schema it is meant to guard, partitions included.
      const names = report.tables.map((table) => table.tableName)
      expect(names).toEqual(expect.arrayContaining(["api_keys", "customers", "signals", "usage_log", "usage_log_default"]))
      const months = report.tables.filter((table) => table.isPartition && table.rootName === "usage_log")
      expect(months.length).toBeGreaterThanOrEqual(3)
      expect(months.every((month) => month.hasPrimaryKey)).toBe(true)
    }))

  it.effect("names every kind of key that breaks the rule", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // A scratch schema with one example of each mistake; dropped afterwards.
      yield* sql.unsafe(`
        DROP SCHEMA IF EXISTS shard_probe CASCADE;
        CREATE SCHEMA shard_probe;
        CREATE TABLE shard_probe.organizations (id text PRIMARY KEY);
        CREATE TABLE shard_probe.currencies (code text PRIMARY KEY);
        CREATE TABLE shard_probe.widgets (
          organization_id text NOT NULL REFERENCES shard_probe.organizations (id),
          id text NOT NULL,
          code text,
          PRIMARY KEY (id, organization_id)
        );
        CREATE UNIQUE INDEX widgets_id ON shard_probe.widgets (id);
        CREATE UNIQUE INDEX widgets_code ON shard_probe.widgets (code) WHERE code IS NOT NULL;
        CREATE TABLE shard_probe.gadgets (
          organization_id text NOT NULL,
          id text NOT NULL,
          widget_id text REFERENCES shard_probe.widgets (id),
          PRIMARY KEY (organization_id, id)
        );
        CREATE TABLE shard_probe.events (
          organization_id text NOT NULL,
          id text NOT NULL,
          at timestamptz NOT NULL,
          PRIMARY KEY (id, organization_id, at)
        ) PARTITION BY RANGE (at);
        CREATE TABLE shard_probe.events_2020 PARTITION OF shard_probe.events
          FOR VALUES FROM ('2020-01-01') TO ('2021-01-01');
      `)
      const report = yield* shardReadiness("shard_probe").pipe(
        Effect.ensuring(Effect.orDie(sql.unsafe("DROP SCHEMA shard_probe CASCADE")))
      )
      const has = (...parts: ReadonlyArray<string>) =>
        report.violations.some((line) => parts.every((part) => line.includes(part)))
      expect(has("currencies: no organization_id column")).toBe(true)
      expect(has("widgets: primary key widgets_pkey leads with id")).toBe(true)
      expect(has("widgets: unique index widgets_id leads with id")).toBe(true)
      expect(has("widgets: partial unique index widgets_code leads with code")).toBe(true)
      expect(has("gadgets: foreign key", "(widget_id) -> widgets (id)", "on both sides")).toBe(true)
      expect(has("events: primary key events_pkey leads with id")).toBe(true)
      expect(has("events_2020 (partition of events): primary key", "leads with id")).toBe(true)
      // The tenant root itself and the well-formed keys are not reported.
      expect(has("organizations")).toBe(false)
      expect(has("widgets_organization_id_fkey")).toBe(false)
      expect(report.violations).toHaveLength(7)
    }))
})
