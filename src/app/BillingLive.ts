/**
 * The billing engine's services, wired together. Needs the SQL client and the
 * webhook outbox; `src/app/Services.ts` puts it below the features that meter
 * usage against it (signals read the current purchase through Metering, and Members).
 */
import { Layer } from "effect"
import { Customers } from "../customers/Customers.ts"
import { Members } from "../members/Members.ts"
import { Portal } from "../portal/Portal.ts"
import { SigningKeys } from "../links/SigningKeys.ts"
import { Adjustments } from "../billing/Adjustments.ts"
import { Balances } from "../billing/Balances.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { Invoices } from "../billing/Invoices.ts"
import { Metering } from "../billing/Metering.ts"
import { Purchases } from "../billing/Purchases.ts"
import { Taxes } from "../billing/Taxes.ts"
import { Wallets } from "../billing/Wallets.ts"

export const BillingLive = Layer.mergeAll(
  Metering.Default,
  Purchases.Default,
  Balances.Default,
  Adjustments.Default,
  Members.Default,
  Portal.Default
).pipe(
  Layer.provideMerge(Invoices.Default),
  Layer.provideMerge(Layer.mergeAll(Wallets.Default, Taxes.Default, SigningKeys.Default)),
  Layer.provideMerge(Ledger.Default),
  Layer.provide(Customers.Default)
)
