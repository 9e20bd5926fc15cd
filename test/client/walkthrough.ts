/**
 * A client generated from the OpenAPI document (openapi-typescript types,
 * openapi-fetch calls), as a customer of the API would write it: every path,
 * body and result below is typed from the document alone. The test compiles
 * this file under `tsc --strict` against freshly generated types
 * (`./.generated/api.ts`) and runs it against a real server.
 */
import createClient from "openapi-fetch"
import type { components, paths } from "./.generated/api.ts"

type Error422 = components["schemas"]["Error422"]

export interface WalkthroughResult {
  readonly customerId: string
  readonly planCost: number
  readonly walletBalance: number
  readonly creditRemaining: number | undefined
  readonly signalQueued: true
  readonly error: {
    readonly httpStatus: number
    readonly statusCode: 422
    readonly status: "ERROR"
    /** Typed from the document: the enum of the 422 codes, so a client can switch on it. */
    readonly code: Error422["statusDetail"]["code"]
    readonly message: string
    readonly result: Error422["result"]
  }
}

/** Fails loudly when a call the walkthrough needs did not succeed. */
const required = <T>(data: T | undefined, what: string): T => {
  if (data === undefined) throw new Error(`${what} failed`)
  return data
}

export const walkthrough = async (baseUrl: string, apiKey: string): Promise<WalkthroughResult> => {
  const client = createClient<paths>({ baseUrl, headers: { authorization: `Bearer ${apiKey}` } })

  const created = required(
    (await client.POST("/api/v1/customers", { body: { name: "Grace", email: "grace@example.com", externalId: "grace-1" } }))
      .data,
    "create a customer"
  )
  const customerId: string = created.result.customer.id

  const credit = required(
    (await client.POST("/api/v1/credits", {
      body: {
        name: "Chat",
        agentKey: "chat",
        marginPercent: 100,
        modelBundle: [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50 }]
      }
    })).data,
    "create a credit"
  ).result.credit

  const plan = required(
    (await client.POST("/api/v1/plans", {
      body: {
        name: "Starter",
        entitlements: [
          { type: "WALLET", billingMode: "ADVANCE", amount: 20 },
          { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 500 }
        ]
      }
    })).data,
    "create a plan"
  ).result.plan

  required(
    (await client.POST("/api/v1/purchases", { body: { externalId: "grace-1", planId: plan.id } })).data,
    "buy the plan"
  )

  const accepted = required(
    (await client.POST("/api/v1/signal/credit", {
      body: { customerId, agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 400, outputTokens: 600 } }
    })).data,
    "send a credit signal"
  )
  // The route answers 200 with the priced usage-log row only when asked to wait (`Prefer: wait=N`).
  if (!("queued" in accepted.result)) throw new Error("a signal sent without Prefer: wait is answered 202")
  const signalQueued: true = accepted.result.queued

  const balances = required(
    (await client.GET("/api/v1/customers/{id}/balances", { params: { path: { id: customerId } } })).data,
    "read balances"
  ).result
  const walletBalance: number = balances.wallet.balance
  const creditRemaining = balances.credits.find((row) => row.creditId === credit.id)?.remaining

  // An adjustment of something the plan does not sell: 422, in the envelope the document types.
  const refused = await client.POST("/api/v1/customers/{id}/units/adjust", {
    params: { path: { id: customerId } },
    body: { agentKey: "no-such-unit", delta: 1 }
  })
  const envelope = refused.error
  // `statusCode` is a literal in each status's envelope, so checking it narrows the union of documented errors.
  if (envelope === undefined || envelope.statusCode !== 422) {
    throw new Error(`expected a 422, got ${refused.response.status}`)
  }
  const narrowed: Error422 = envelope

  return {
    customerId,
    planCost: plan.cost,
    walletBalance,
    creditRemaining,
    signalQueued,
    error: {
      httpStatus: refused.response.status,
      statusCode: narrowed.statusCode,
      status: narrowed.statusDetail.status,
      code: narrowed.statusDetail.code,
      message: narrowed.statusDetail.message,
      result: narrowed.result
    }
  }
}
