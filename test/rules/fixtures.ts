/**
 * Builders for the pure rule tests (test/rules/): plan snapshots, balance rows,
 * renewal states and claimed signals in memory, with decimals written as text.
 */
import type { BigDecimal } from "effect"
import type { RenewalBalance, RenewalPurchase, RenewalState } from "../../src/billing/Renewal.ts"
import { decimal, toSql, ZERO } from "../../src/money.ts"
import type { PlanSnapshot, SnapshotComponent } from "../../src/pricing/PlanSnapshot.ts"
import type { Customer, DecodedSignal, SignalRecord } from "../../src/signals/BatchContext.ts"

export const d = decimal
/** A decimal as its normalised text, so an assertion names the exact amount. */
export const text = (value: BigDecimal.BigDecimal | null | undefined) => value == null ? value : toSql(value)

export const component = (
  id: string,
  fields: Partial<Omit<SnapshotComponent, "quantity" | "amount" | "unitPrice" | "charge">> & {
    readonly quantity?: string | null
    readonly amount?: string | null
    readonly unitPrice?: string | null
    readonly charge?: string
  } = {}
): SnapshotComponent => {
  const { quantity, amount, unitPrice, charge, ...rest } = fields
  return {
    id,
    type: "CREDIT",
    billingMode: "ADVANCE",
    targetId: `target-${id}`,
    targetName: `Target ${id}`,
    agentKey: null,
    rollover: false,
    creditTerms: null,
    pricingType: null,
    flatPrice: null,
    tiers: [],
    steps: [],
    covers: { credits: [], outcomes: [], units: [] },
    ...rest,
    quantity: quantity == null ? null : d(quantity),
    amount: amount == null ? null : d(amount),
    unitPrice: unitPrice == null ? null : d(unitPrice),
    charge: d(charge ?? "0")
  }
}

/** A snapshot component with every field given or empty: the meters' and the check's tests name only what they test. */
export const snapshotComponent = (
  fields: Partial<SnapshotComponent> & Pick<SnapshotComponent, "id" | "type" | "billingMode">
): SnapshotComponent => ({
  targetId: null,
  targetName: fields.id,
  agentKey: null,
  quantity: null,
  amount: null,
  rollover: false,
  unitPrice: null,
  pricingType: null,
  flatPrice: null,
  tiers: [],
  charge: ZERO,
  steps: [],
  covers: { credits: [], outcomes: [], units: [] },
  ...fields
})

export const plan = (
  planId: string,
  components: ReadonlyArray<SnapshotComponent>,
  fields: { readonly cost?: string; readonly priceAdjustment?: string; readonly name?: string } = {}
): PlanSnapshot => ({
  planId,
  name: fields.name ?? `Plan ${planId}`,
  description: "",
  billingCycle: "MONTHLY",
  currencyCode: "USD",
  priceAdjustment: d(fields.priceAdjustment ?? "0"),
  walletFundedArrear: false,
  cost: d(fields.cost ?? "0"),
  components
})

export const balance = (
  c: SnapshotComponent,
  values: {
    readonly granted?: string
    readonly used?: string
    readonly remaining?: string
    readonly cycleQuantity?: string
    readonly arrearAmount?: string
    readonly originalGranted?: string | null
  } = {}
): RenewalBalance => ({
  componentId: c.id,
  customerId: "cus_1",
  type: c.type,
  billingMode: c.billingMode,
  targetId: c.targetId,
  granted: d(values.granted ?? "0"),
  used: d(values.used ?? "0"),
  remaining: d(values.remaining ?? "0"),
  originalGranted: values.originalGranted === undefined ? c.quantity : values.originalGranted === null ? null : d(values.originalGranted),
  cycleQuantity: d(values.cycleQuantity ?? "0"),
  arrearAmount: d(values.arrearAmount ?? "0")
})

export const at = (iso: string) => new Date(iso)

export const purchase = (snapshot: PlanSnapshot, fields: Partial<RenewalPurchase> = {}): RenewalPurchase => ({
  id: "pur_1",
  customerId: "cus_1",
  status: "ACTIVE",
  billingDate: at("2026-01-01T00:00:00Z"),
  cycleIndex: 0,
  periodStart: at("2026-01-01T00:00:00Z"),
  periodEnd: at("2026-02-01T00:00:00Z"),
  autoPayment: false,
  snapshot,
  ...fields
})

export const state = (
  p: RenewalPurchase,
  balances: ReadonlyArray<RenewalBalance> = [],
  fields: Partial<Omit<RenewalState, "purchase" | "balances">> = {}
): RenewalState => ({ organizationId: "org_1", purchase: p, balances, taxes: [], ...fields })

/** Deterministic ids: prefix and a counter. */
export const ids = () => {
  let n = 0
  return (prefix: string) => `${prefix}_${++n}`
}

export { ZERO }

/** The organisation and customer the drain's pure tests price for. */
export const ORG = "org_1"
export const CUSTOMER: Customer = { organizationId: ORG, id: "cus_1", externalId: "jo-1", archivedAt: null }
/** When the pure tests' signals happened. */
export const MOMENT = new Date("2026-11-27T08:00:00.000Z")

let sequence = 0
/** A claimed signal of the route, for `CUSTOMER`, at `MOMENT`, with a fresh id. */
export const queued = (route: SignalRecord["route"], body: DecodedSignal["body"], fields: Partial<SignalRecord> = {}): DecodedSignal => {
  sequence += 1
  return {
    record: {
      organizationId: ORG,
      id: `sig_${sequence}`,
      messageId: `msg_${sequence}`,
      route,
      customerId: CUSTOMER.id,
      externalId: null,
      runId: null,
      compositeRef: null,
      compositeValue: null,
      member: null,
      body,
      moment: MOMENT,
      momentSource: "TIMESTAMP",
      ...fields
    } as SignalRecord,
    body
  }
}
