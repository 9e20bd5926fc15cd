/**
 * The package's main export: what code outside the service uses. Receivers of
 * webhooks verify signatures with `verifyWebhookSignature` (see docs/webhooks.md).
 * Only dependency-free modules are exported here, so importing the package
 * never starts or pulls in the service.
 */
export { computeSignature, signatureHeader, verifyWebhookSignature, type VerifyOptions } from "./webhooks/Signature.ts"
export {
  type ApiRecord,
  type BalanceThresholdEventData,
  type CreditNoteEventData,
  DEFAULT_EVENT_TYPES,
  EVENT_TYPES,
  type EventType,
  type InvoiceEventData,
  LIFECYCLE_EVENT_TYPES,
  type LifecycleEventType,
  type PurchaseChangeKind,
  type PurchaseEventData,
  type SignalRefusedEventData,
  type WalletBalanceEventData,
  type WebhookEventBody
} from "./webhooks/EventBody.ts"
