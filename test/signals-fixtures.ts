/** Shared set-up of the signal tests: requests as a tenant, the worker in-process, and a small priced catalogue. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { expect } from "vitest"
import type { ErrorCode } from "../src/http/ApiErrors.ts"
import { makeId } from "../src/ids.ts"
import { SignalProcessor } from "../src/signals/SignalProcessor.ts"
import { expectError as expectErrorCode } from "./support/Http.ts"
import type { Tenant, TestApp } from "./support/TestApp.ts"

export const client = (app: TestApp, tenant: Tenant) => ({
  get: (path: string) => app.request("GET", path, { key: tenant.apiKey }),
  post: (path: string, body?: unknown) => app.request("POST", path, { key: tenant.apiKey, body }),
  patch: (path: string, body: unknown) => app.request("PATCH", path, { key: tenant.apiKey, body }),
  del: (path: string) => app.request("DELETE", path, { key: tenant.apiKey }),
  /** The id of what a create call made; anything but 201 stops the test with the answer. */
  created: async (path: string, body: unknown, field: string): Promise<string> => {
    const response = await app.request("POST", path, { key: tenant.apiKey, body })
    if (response.status !== 201) throw new Error(`${path}: ${response.status} ${JSON.stringify(response.body)}`)
    return response.body.result[field].id
  }
})

/** An error answer in the envelope with its status and code (test/support/Http.ts), its message holding `text` when given. */
export const expectError = (response: { status: number; body: any }, status: number, code: ErrorCode, text?: string) => {
  expectErrorCode(response, status, code)
  if (text !== undefined) expect(response.body.statusDetail.message).toContain(text)
}

/** Runs the pricing job in the test's process until the queue is empty. */
export const drain = (app: TestApp) =>
  app.run(Effect.flatMap(SignalProcessor, (processor) =>
    Effect.iterate(-1, { while: (handled) => handled !== 0, body: () => processor.runOnce })))

/**
 * A credit signal of `customerId` as the intake writes it, queued: a row for
 * `insertSignals`, for tests that build a queue of many customers directly.
 */
export const queuedCredit = (organizationId: string, customerId: string, idempotencyKey: string | null) => ({
  organizationId,
  id: makeId("sig"),
  messageId: makeId("msg"),
  route: "CREDIT" as const,
  customerId,
  externalId: null,
  idempotencyKey,
  agentKey: "chat",
  runId: null,
  compositeRef: null,
  compositeValue: null,
  member: null,
  body: { customerId, agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1, outputTokens: 1 } }
})

/** Customers of `organizationId` with these ids (each its own externalId, slug and name), written directly. */
export const insertCustomers = (sql: SqlClient.SqlClient, organizationId: string, ids: ReadonlyArray<string>) =>
  sql`INSERT INTO customers (organization_id, id, external_id, slug, name, email, currency_code)
      SELECT ${organizationId}, id, id, id, id, id || '@example.com', 'USD' FROM unnest(${ids}::text[]) AS id`

/** Rows of a query on the test database. */
export const query = <A extends object>(app: TestApp, text: string, params: ReadonlyArray<unknown> = []) =>
  app.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<A>(text, params)))

/** A gpt-4o bundle: basePrice = 1000 * (50*2.5 + 50*10) / 100 / 1e6 = 0.00625. */
export const gpt4oBundle = [
  { modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }
]

/**
 * A customer on a monthly plan of `credits` (1,000 unless told) ADVANCE credits of "chat" (gpt-4o, 20%
 * margin: 1.2 credits and 0.009 USD per 1,000-in/500-out call). Returns the customer's id.
 */
export const customerWithChatCredits = async (
  app: TestApp,
  tenant: Tenant,
  customer: Record<string, unknown> = {},
  credits = 1000
) => {
  const api = client(app, tenant)
  const credit = await api.created("/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: gpt4oBundle }, "credit")
  const plan = await api.created("/plans", {
    name: "Plan",
    billingCycle: "MONTHLY",
    entitlements: [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit, quantity: credits }]
  }, "plan")
  const customerId = await api.created("/customers", { name: "Jo", email: "jo@example.com", ...customer }, "customer")
  expect((await api.post("/purchases", { customerId, planId: plan })).status).toBe(201)
  return customerId
}

/** Sends `count` requests, `concurrency` at a time; the answers in order. */
export const sendMany = async <A>(count: number, concurrency: number, send: (index: number) => Promise<A>) => {
  const answers = new Array<A>(count)
  let next = 0
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) {
      const index = next++
      answers[index] = await send(index)
    }
  }))
  return answers
}
