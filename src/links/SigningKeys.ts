/**
 * Each organisation's signing secret for portal tokens and invoice pay links,
 * made on first use and kept in the database so every API process and the CLI
 * sign and verify alike.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { randomToken, type OrganizationId } from "../ids.ts"

export class SigningKeys extends Effect.Service<SigningKeys>()("SigningKeys", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const secretOf = Effect.fn("SigningKeys.secretOf")(function*(organizationId: OrganizationId) {
        yield* sql`INSERT INTO signing_keys (organization_id, secret) VALUES (${organizationId}, ${randomToken(32)})
            ON CONFLICT DO NOTHING`
        const rows = yield* sql<{ secret: string }>`
          SELECT secret FROM signing_keys WHERE organization_id = ${organizationId}`
        return rows[0]!.secret
      }, Effect.orDie)

    /**
     * The secret to verify with, never made: a token naming an organisation
     * that has none (or does not exist) was not signed by us.
     */
    const existingSecretOf = Effect.fn("SigningKeys.existingSecretOf")((organizationId: OrganizationId) =>
      Effect.map(
        sql<{ secret: string }>`SELECT secret FROM signing_keys WHERE organization_id = ${organizationId}`,
        (rows) => Option.fromNullable(rows[0]?.secret)
      ).pipe(Effect.orDie))

    return { secretOf, existingSecretOf } as const
  })
}) {}
