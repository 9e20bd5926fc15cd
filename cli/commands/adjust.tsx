import type { Command } from "commander"
import { BigDecimal, Effect, type Schema } from "effect"
import { type AdjustEndpoint, AdjustResult, Adjustments, FractionAdjust, WalletAdjust, WholeAdjust } from "../../src/billing/Adjustments.ts"
import { Details } from "../ui/Table.tsx"
import { decodeInput, encode, organizationOf, runnerOn, withOrg } from "../run.ts"
import { customerIdOf } from "../customerRef.ts"
import { decimalFlag } from "../DecimalFlag.ts"
import { BillingCommandServices } from "../commandServices.ts"

const run = runnerOn(BillingCommandServices)

const schemaOf: Record<AdjustEndpoint, Schema.Schema<any, any>> = {
  credits: WholeAdjust,
  outcomes: WholeAdjust,
  units: FractionAdjust,
  composites: WholeAdjust,
  wallet: WalletAdjust
}

const what: Record<AdjustEndpoint, string> = {
  credits: "a credit balance (--agent-key is the credit's key)",
  outcomes: "an outcome balance (--agent-key is a step's key)",
  units: "a unit balance (--agent-key is the unit's key; fractions allowed)",
  composites: "a composite balance (--agent-key is the composite's refId)",
  wallet: "the USD wallet (may go below zero)"
}

interface AdjustOptions {
  readonly json?: boolean
  readonly org?: string
  readonly externalId?: string
  readonly agentKey?: string
  readonly delta: string
  readonly notes?: string
  readonly idempotencyKey?: string
  readonly reserved?: boolean
}

export const registerAdjust = (program: Command) => {
  const adjust = program.command("adjust").description("grant or claw back a customer's prepaid balance")
  for (const endpoint of Object.keys(schemaOf) as Array<AdjustEndpoint>) {
    const command = withOrg(adjust.command(endpoint).description(`adjust ${what[endpoint]}`).argument("[customerId]"))
      .option("--external-id <id>", "the active customer with this external id")
      .requiredOption("--delta <n>", "positive grants, negative claws back", decimalFlag)
      .option("--notes <text>", "why (at most 200 characters)")
      .option("--idempotency-key <key>", "a repeat with this key adjusts nothing and says so")
    if (endpoint !== "wallet") command.requiredOption("--agent-key <key>", "what to adjust")
    else command.option("--reserved", "move the Reserved Wallet instead (no ledger row, no webhook event)")
    command.action((id: string | undefined, options: AdjustOptions) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const customerId = yield* customerIdOf(organizationId, id, options.externalId)
          const input = yield* decodeInput(schemaOf[endpoint], {
            ...(endpoint === "wallet" ? { wallet: options.reserved ? "RESERVED" : "ORDINARY" } : { agentKey: options.agentKey }),
            delta: options.delta,
            ...(options.notes !== undefined ? { notes: options.notes } : {}),
            ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey } : {})
          })
          return yield* Effect.flatMap(Adjustments, (adjustments) =>
            adjustments.adjust(organizationId, customerId, endpoint, input))
        }),
        {
          json: encode(AdjustResult),
          view: (result) => (
            <Details
              title={result.replayed ? "Already processed: nothing adjusted again" : "Balance adjusted"}
              fields={[
                ["applied", BigDecimal.format(result.appliedDelta)],
                ["floored", result.floored ? "yes: the claw-back was larger than the balance, which stopped at zero" : "no"],
                ["remaining", BigDecimal.format(result.remaining)],
                ["adjusted at", result.adjustedAt.toISOString()],
                ["customer archived", result.customerArchived ? "yes" : "no"]
              ]}
            />
          )
        }
      )
    )
  }
}
