/**
 * The lifecycle events' bodies with their records whole: the purchase as
 * `GET /purchases/{id}` answers it (`PurchaseJson`), the invoice as
 * `GET /invoices/{id}` answers it (`Invoice`) and the credit note as
 * `GET /invoices/{id}/credit-notes` lists it (`CreditNote`). The envelope and the other
 * fields are the webhooks floor's (`lifecycleBodySchemas`,
 * src/webhooks/EventSchemas.ts); the OpenAPI document's `webhooks` section is
 * rendered from these (src/app/OpenApiDoc.ts), and the tests decode every
 * delivered lifecycle event with them.
 */
import { lifecycleBodySchemas } from "../webhooks/EventSchemas.ts"
import { CreditNote } from "./CreditNote.ts"
import { Invoice } from "./Invoice.ts"
import { PurchaseJson } from "./Purchase.ts"

export const LifecycleEventBodySchemas = lifecycleBodySchemas({ purchase: PurchaseJson, invoice: Invoice, credit_note: CreditNote })
