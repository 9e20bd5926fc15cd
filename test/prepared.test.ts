/**
 * The prepared-statement tag (src/db/Prepared.ts): what it sends is the statement's own text
 * under the marker the pool's clients read, with its values as parameters, the same copy of the
 * marked strings each time, and the rows it reads are the statement's.
 */
import { describe, expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { PREPARED_MARKER, prepared } from "../src/db/Prepared.ts"
import { MigratedTestDatabase } from "./support/Layers.ts"

describe("prepared(sql)", () => {
  it.layer(MigratedTestDatabase)((it) => {
    it.effect("sends the statement's text under the marker, values as parameters", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const value = "x'); DROP TABLE customers; --"
        const [text, params] = prepared(sql)`SELECT ${value}::text AS v, ${2}::int AS n`.compile()
        expect(text.startsWith(`${PREPARED_MARKER} SELECT `)).toBe(true)
        expect(params).toEqual([value, 2])
        const rows = yield* prepared(sql)<{ v: string; n: number }>`SELECT ${value}::text AS v, ${2}::int AS n`
        expect(rows).toEqual([{ v: value, n: 2 }])
      }))

    it.effect("nests fragments, and the marker leads the whole text once", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const [text] = prepared(sql)`${sql`SELECT 1`} UNION ALL SELECT 2`.compile()
        expect(text).toBe(`${PREPARED_MARKER} SELECT 1 UNION ALL SELECT 2`)
        expect(text.split(PREPARED_MARKER)).toHaveLength(2)
      }))
  })
})
