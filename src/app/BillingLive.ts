/**
 * The billing engine: purchases, balances, wallets, adjustments, invoices,
 * taxes, members and portal tokens, with what they name (customers, plans, the
 * ledger and its outbox). Each brings its own dependencies; listed here are the
 * ones its callers (src/app/Services.ts, the CLI's billing commands) use.
 */
import { Layer } from "effect"
import { Adjustments } from "../billing/Adjustments.ts"
import { Balances } from "../billing/Balances.ts"
import { Invoices } from "../billing/Invoices.ts"
import { InvoicePdfs } from "../billing/InvoicePdfs.ts"
import { CurrentPurchases } from "../billing/CurrentPurchases.ts"
import { Purchases } from "../billing/Purchases.ts"
import { Taxes } from "../billing/Taxes.ts"
import { Wallets } from "../billing/Wallets.ts"
import { Customers } from "../customers/Customers.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { SigningKeys } from "../links/SigningKeys.ts"
import { Members } from "../members/Members.ts"
import { Plans } from "../plans/Plans.ts"
import { Portal } from "../portal/Portal.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import { withArrivalsAnswered } from "./CustomersLive.ts"

export const BillingLive = withArrivalsAnswered(Layer.mergeAll(
  CurrentPurchases.Default,
  Purchases.Default,
  Balances.Default,
  Wallets.Default,
  Adjustments.Default,
  Invoices.Default,
  InvoicePdfs.Default,
  Taxes.Default,
  Members.Default,
  Portal.Default,
  SigningKeys.Default,
  Ledger.Default,
  WebhookOutbox.Default,
  Plans.Default,
  Customers.Default
))
