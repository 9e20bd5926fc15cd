/**
 * Organisations (workspaces). Created by operators from the CLI, which stands
 * in for the spec's dashboard; a new organisation gets the built-in models and
 * its first API key in the same transaction.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { dieOnSqlError, findAll, findOne, orDie } from "../db/Sql.ts"
import { BadRequest, NotFound } from "../errors.ts"
import { makeId } from "../ids.ts"
import { builtinModels } from "../models/BuiltinModels.ts"
import { ApiKeys } from "./ApiKeys.ts"

export class Organization extends Schema.Class<Organization>("Organization")({
  id: Schema.String,
  name: Schema.String,
  currencyCode: Schema.String,
  reservedWalletEnabled: Schema.Boolean,
  paymentInstructions: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
}) {}

export interface OrganizationSettings {
  readonly reservedWalletEnabled?: boolean | undefined
  readonly name?: string | undefined
  /** Shown on the hosted page of an OPEN invoice; "" clears it. */
  readonly paymentInstructions?: string | undefined
}

/** Enough for bank details and a note; the page shows it as plain text. */
export const MAX_PAYMENT_INSTRUCTIONS = 2000

export class Organizations extends Effect.Service<Organizations>()("Organizations", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keys = yield* ApiKeys

    const create = (input: { readonly name: string; readonly currencyCode?: string | undefined }) =>
      Effect.gen(function*() {
        const name = input.name.trim()
        if (name.length === 0 || name.length > 120) {
          return yield* new BadRequest({ message: "name must be 1 to 120 characters" })
        }
        const currencyCode = (input.currencyCode ?? "USD").toUpperCase()
        if (!/^[A-Z]{3}$/.test(currencyCode)) {
          return yield* new BadRequest({ message: "currencyCode must be a 3-letter ISO 4217 code" })
        }
        const id = makeId("org")
        const organization = (yield* findAll(
          Organization,
          sql`INSERT INTO organizations (id, name, currency_code) VALUES (${id}, ${name}, ${currencyCode}) RETURNING *`
        ))[0]!
        yield* orDie(sql`INSERT INTO models ${
          sql.insert(builtinModels.map((model) => ({
            organizationId: id,
            id: model.id,
            name: model.name,
            inputRate: model.input,
            outputRate: model.output,
            cacheReadRate: model.cacheRead,
            cacheWriteRate: model.cacheWrite,
            builtIn: true
          })))
        }`)
        const { secret } = yield* keys.create(id, { name: "default" })
        return { organization, apiKey: secret }
      }).pipe(sql.withTransaction, dieOnSqlError)

    const list = findAll(Organization, sql`SELECT * FROM organizations ORDER BY id`)

    const get = (id: string) =>
      Effect.flatMap(
        findOne(Organization, sql`SELECT * FROM organizations WHERE id = ${id}`),
        Option.match({
          onNone: () => Effect.fail(new NotFound({ message: `Organization ${id} not found` })),
          onSome: Effect.succeed
        })
      )

    const updateSettings = (id: string, settings: OrganizationSettings) =>
      Effect.gen(function*() {
        yield* get(id)
        const instructions = settings.paymentInstructions?.trim()
        if (instructions !== undefined && instructions.length > MAX_PAYMENT_INSTRUCTIONS) {
          return yield* new BadRequest({ message: `payment instructions must be at most ${MAX_PAYMENT_INSTRUCTIONS} characters` })
        }
        const updated = yield* findOne(
          Organization,
          sql`UPDATE organizations SET
                reserved_wallet_enabled = coalesce(${settings.reservedWalletEnabled ?? null}, reserved_wallet_enabled),
                name = coalesce(${settings.name ?? null}, name),
                payment_instructions = CASE WHEN ${instructions === undefined}::boolean THEN payment_instructions
                  ELSE nullif(${instructions ?? ""}, '') END,
                updated_at = now()
              WHERE id = ${id} RETURNING *`
        )
        return Option.getOrThrow(updated)
      })

    return { create, list, get, updateSettings } as const
  }),
  dependencies: []
}) {}
