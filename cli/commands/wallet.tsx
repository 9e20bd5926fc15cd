import type { Command } from "commander"
import { listFooter, nextCursorOf, limitOption } from "../lists.ts"
import { BigDecimal, Effect } from "effect"
import { RecurringGrantBody, WalletAlertBody, WalletLedger } from "../../src/billing/BalancesApi.ts"
import { Wallets } from "../../src/billing/Wallets.ts"
import { toPage } from "../../src/http/Pagination.ts"
import { Details, Table } from "../ui/Table.tsx"
import { decodeInput, encode, organizationOf, runnerOn } from "../run.ts"
import { customerIdOf, withCustomer } from "../customerRef.ts"
import { decimalFlag } from "../DecimalFlag.ts"
import { BillingCommandServices } from "../commandServices.ts"

const run = runnerOn(BillingCommandServices)

interface WalletOptions {
  readonly json?: boolean
  readonly org?: string
  readonly externalId?: string
}

const usd = (value: BigDecimal.BigDecimal | null) => (value === null ? "-" : `${BigDecimal.format(value)} USD`)

export const registerWallet = (program: Command) => {
  const wallet = program.command("wallet").description("a customer's USD wallet")

  withCustomer(wallet.command("alert").description("set the low-balance alert level"))
    .requiredOption("--threshold <usd|none>", "USD, 0 or more; none falls back to each webhook endpoint's threshold")
    .action((id: string | undefined, options: WalletOptions & { threshold: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const customerId = yield* customerIdOf(organizationId, id, options.externalId)
          const threshold = options.threshold === "none" ? null : options.threshold
          const body = yield* decodeInput(WalletAlertBody, { threshold })
          return yield* Effect.flatMap(Wallets, (wallets) => wallets.setAlert(organizationId, customerId, body.threshold))
        }),
        {
          json: (row) => ({ lowBalanceAlertUsd: row.lowBalanceAlertUsd === null ? null : BigDecimal.unsafeToNumber(row.lowBalanceAlertUsd) }),
          view: (row) => <Details title="Low balance alert set." fields={[["level", usd(row.lowBalanceAlertUsd)]]} />
        }
      )
    )

  withCustomer(wallet.command("grant").description("USD credited to the wallet at every cycle start (0 stops it)"))
    .requiredOption("--quantity <usd>", "USD per cycle", decimalFlag)
    .action((id: string | undefined, options: WalletOptions & { quantity: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const customerId = yield* customerIdOf(organizationId, id, options.externalId)
          const body = yield* decodeInput(RecurringGrantBody, { kind: "wallet", quantity: options.quantity })
          const quantity = BigDecimal.isZero(body.quantity) ? null : body.quantity
          return yield* Effect.flatMap(Wallets, (wallets) => wallets.setRecurringGrant(organizationId, customerId, quantity))
        }),
        {
          json: (row) => ({
            customerId: row.customerId,
            recurringGrant: { kind: "wallet", quantity: row.recurringGrantUsd === null ? 0 : BigDecimal.unsafeToNumber(row.recurringGrantUsd) }
          }),
          view: (row) => <Details title="Recurring grant set." fields={[["per cycle", usd(row.recurringGrantUsd)]]} />
        }
      )
    )

  withCustomer(wallet.command("ledger").description("the wallet's ledger, oldest first"))
    .option(...limitOption)
    .option("--cursor <id>", "id of the last row of the previous page")
    .action((id: string | undefined, options: WalletOptions & { limit?: number; cursor?: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const customerId = yield* customerIdOf(organizationId, id, options.externalId)
          const { entries, wallet } = yield* Effect.flatMap(Wallets, (wallets) =>
            wallets.ledger(organizationId, customerId, toPage(options)))
          return { customerId, balance: wallet.balance, lowBalanceAlertUsd: wallet.lowBalanceAlertUsd, entries }
        }),
        {
          json: (ledger) => ({ ...encode(WalletLedger)(ledger), nextCursor: nextCursorOf(ledger.entries, options) }),
          view: (ledger) => (
            <Table
              title={`Wallet of ${ledger.customerId}: ${usd(ledger.balance)}, alert ${usd(ledger.lowBalanceAlertUsd)}`}
              columns={[
                { header: "AT", value: (e) => e.createdAt.toISOString() },
                { header: "TYPE", value: (e) => e.type },
                { header: "DELTA", value: (e) => BigDecimal.format(e.delta), align: "right" },
                { header: "BALANCE", value: (e) => BigDecimal.format(e.balanceAfter), align: "right" },
                { header: "USAGE LOG", value: (e) => e.usageLogId ?? "-" }
              ]}
              rows={ledger.entries}
              footer={listFooter(`${ledger.entries.length} entries`, ledger.entries, options)}
            />
          )
        }
      )
    )
}
