/**
 * The billing engine's services, wired together. Needs the SQL client and the
 * webhook outbox; `src/Services.ts` puts it below the features that meter
 * usage against it (signals read the current purchase through Metering, and Members).
 */
import { Layer } from "effect"
import { Customers } from "../customers/Customers.ts"
import { Members } from "../members/Members.ts"
import { Portal } from "../portal/Portal.ts"
import { SigningKeys } from "../links/SigningKeys.ts"
import { Adjustments } from "./Adjustments.ts"
import { Balances } from "./Balances.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { Invoices } from "./Invoices.ts"
import { Metering } from "./Metering.ts"
import { Purchases } from "./Purchases.ts"
import { Taxes } from "./Taxes.ts"
import { Wallets } from "./Wallets.ts"

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
