/**
 * The body the inbox keeps for each queued route is what its schema encodes
 * from the decoded request. Routes whose schema decodes every value to itself
 * store the decoded body without encoding it again (src/signals/Intake.ts
 * `storedBody`); this checks that shortcut against the encoder, field by field.
 */
import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { schemaOfRoute } from "../src/signals/Signal.ts"
import { decodesToItself } from "../src/SchemaCheck.ts"
import { type QueuedRoute, storedBody } from "../src/signals/Intake.ts"

const everyField = {
  customerId: "cus_1",
  externalId: "ext-1",
  member: "Ana@Example.com",
  idempotencyKey: "key-1",
  custom: { nested: { list: [1, "two", null, true] }, n: 1.5 }
}

const samples: Record<QueuedRoute, ReadonlyArray<unknown>> = {
  CREDIT: [
    { ...everyField, agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 10, outputTokens: 0, cacheTokens: 3, cacheWriteTokens: 1 }, composite: { ref: "x" } },
    { customerId: "cus_1", agentKey: "chat", usage: { model: "gpt-4o" } }
  ],
  OUTCOME: [
    { ...everyField, agentKey: "draft", runId: "run-1", usage: { model: "gpt-4o", inputTokens: 5 }, composite: { ref: "y" } },
    { externalId: "ext-2", agentKey: "draft", runId: "run-2" }
  ],
  UNIT: [
    { ...everyField, agentKey: "pages", quantity: 2.5, composite: { ref: "z" } },
    { customerId: "cus_1", agentKey: "pages", quantity: 3 },
    { customerId: "cus_1", agentKey: "pages" }
  ],
  WALLET: [
    { ...everyField, usage: { model: "gpt-4o", inputTokens: 2000, outputTokens: 1000 } },
    { customerId: "cus_1", usage: { model: "gpt-4o" } }
  ]
}

describe("the stored body of a queued signal", () => {
  for (const route of Object.keys(samples) as Array<QueuedRoute>) {
    it(`${route}: equals the schema's encoding of the decoded request`, () => {
      const schema = schemaOfRoute[route] as unknown as Schema.Schema<unknown, unknown>
      for (const sample of samples[route]) {
        const decoded = Schema.decodeUnknownSync(schema)(sample)
        expect(storedBody(route, decoded)).toEqual(Schema.encodeSync(schema)(decoded))
      }
    })
  }

  it("stores credit, outcome step and wallet bodies as decoded, and encodes unit bodies (a decimal quantity) again", () => {
    expect(decodesToItself(schemaOfRoute.CREDIT.ast)).toBe(true)
    expect(decodesToItself(schemaOfRoute.OUTCOME.ast)).toBe(true)
    expect(decodesToItself(schemaOfRoute.WALLET.ast)).toBe(true)
    expect(decodesToItself(schemaOfRoute.UNIT.ast)).toBe(false)
  })

  it("sees a transformation, a declaration or a recursive schema at any depth", () => {
    expect(decodesToItself(Schema.Struct({ a: Schema.Struct({ b: Schema.NumberFromString }) }).ast)).toBe(false)
    expect(decodesToItself(Schema.Struct({ a: Schema.optional(Schema.Array(Schema.Date)) }).ast)).toBe(false)
    expect(decodesToItself(Schema.Record({ key: Schema.String, value: Schema.BigDecimal }).ast)).toBe(false)
    expect(decodesToItself(Schema.Union(Schema.String, Schema.Trim).ast)).toBe(false)
    interface Tree { readonly children: ReadonlyArray<Tree> }
    const Tree: Schema.Schema<Tree> = Schema.Struct({ children: Schema.Array(Schema.suspend(() => Tree)) })
    expect(decodesToItself(Tree.ast)).toBe(false)
    expect(decodesToItself(Schema.Struct({ a: Schema.String.pipe(Schema.minLength(1)), b: Schema.optional(Schema.Literal("x", "y")) }).ast)).toBe(true)
  })
})
