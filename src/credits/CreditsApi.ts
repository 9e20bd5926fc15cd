import { catalogueGroup } from "../http/CatalogueApi.ts"
import { Credit, CreditCreate, CreditUpdate } from "./Credit.ts"

export class CreditsApi extends catalogueGroup({
  group: "credits",
  key: "credit",
  label: "Credit",
  listed: Credit,
  record: Credit,
  create: CreditCreate,
  update: CreditUpdate,
  docs: {
    tag: "Credits: token-metered entitlements, drawn down by `/signal/credit` through their `agentKey`. The price of a " +
      "credit is worked out by the service from its model bundle and margin; a client never sends a price.",
    create: "Defines a credit: its `agentKey`, its model bundle (at least one enabled model with its token weights) and " +
      "its margin. The service computes `tokensPerCredit`, `basePrice` and `pricePerCredit` from the workspace's model " +
      "rates. The `agentKey` must not be held by another active credit.",
    update: "Changes the fields sent and leaves the others untouched. Sending `modelBundle` re-prices the credit; plans " +
      "already bought keep the price they were bought at.",
    createErrors: {
      409: "The `agentKey` is already held by another active credit.",
      422: "A model of the bundle is not enabled in the workspace."
    },
    updateErrors: {
      409: "The new `agentKey` is already held by another active credit.",
      422: "A model of the bundle is not enabled in the workspace."
    },
    unarchiveConflict: "Another active credit has taken this credit's `agentKey` since it was archived."
  }
}) {}
