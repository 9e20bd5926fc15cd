/**
 * One bad signal never holds up the others (docs/signals.md, "The worker"):
 * - a stored body that no longer decodes fails that signal alone (500);
 * - a signal whose writes the database refuses makes its batch roll back; the
 *   worker then prices those signals again in halves (test/fault-batches.test.ts
 *   counts the transactions), so only that one ends FAILED (500) and every
 *   other is billed exactly once.
 * The database's refusal is a test-only trigger on the usage log. Either way
 * the failed signal is told to an endpoint subscribed to `signal.refused`
 * (an event and its delivery, written with the refusal), the others are not.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, customerWithChatCredits, drain, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
let customerId: string

const send = async (count: number) => {
  const ids: Array<string> = []
  for (let i = 0; i < count; i++) {
    const answer = await client(app, acme).post("/signal/credit", {
      customerId,
      agentKey: "chat",
      usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
    })
    expect(answer.status).toBe(202)
    ids.push(answer.body.result.rawId)
  }
  return ids
}

const states = (ids: ReadonlyArray<string>) =>
  query<{ id: string; status: string; errorStatus: number | null; usageRows: string }>(
    app,
    `SELECT s.id, s.status, s.error_status,
            (SELECT count(*) FROM usage_log u WHERE u.organization_id = s.organization_id AND u.signal_id = s.id) AS usage_rows
     FROM signals s WHERE s.organization_id = $1 AND s.id = ANY($2) ORDER BY s.id`,
    [acme.organizationId, ids]
  )

/** The raw ids of the `signal.refused` events written for the workspace, each with its one delivery. */
const refusedTold = async () =>
  (await query<{ rawId: string; deliveries: string }>(
    app,
    `SELECT e.body::jsonb -> 'data' ->> 'raw_id' AS raw_id,
            (SELECT count(*) FROM webhook_deliveries d WHERE d.organization_id = e.organization_id AND d.event_id = e.id) AS deliveries
     FROM webhook_events e WHERE e.organization_id = $1 AND e.event_type = 'signal.refused' ORDER BY 1`,
    [acme.organizationId]
  )).map((row) => [row.rawId, Number(row.deliveries)])

const creditsUsed = async () =>
  (await query<{ used: string }>(app, "SELECT used FROM purchase_balances WHERE organization_id = $1 AND type = 'CREDIT'", [
    acme.organizationId
  ]))[0]!.used

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Isolation")
  customerId = await customerWithChatCredits(app, acme)
  // Never delivered here (no sender runs): what is told is read from the outbox.
  const endpoint = await client(app, acme).post("/webhook-endpoints", { url: "https://example.com/refused", events: ["signal.refused"] })
  expect(endpoint.status, JSON.stringify(endpoint.body)).toBe(201)
})
afterAll(() => app.close())

describe("one bad signal in a batch", () => {
  it("fails alone when its stored body no longer decodes", async () => {
    const ids = await send(3)
    await query(app, `UPDATE signals SET body = jsonb_set(body, '{usage,inputTokens}', '-5') WHERE organization_id = $1 AND id = $2`, [
      acme.organizationId,
      ids[1]
    ])
    const before = await creditsUsed()
    await drain(app)
    expect((await states(ids)).map((s) => [s.status, s.errorStatus, s.usageRows])).toEqual([
      ["PROCESSED", null, "1"],
      ["FAILED", 500, "0"],
      ["PROCESSED", null, "1"]
    ])
    // Two signals of 1.2 credits each (0.0075 / 0.00625).
    expect(Number(await creditsUsed()) - Number(before)).toBeCloseTo(2.4, 12)
    expect(await refusedTold()).toEqual([[ids[1], 1]])
  })

  it("fails alone when the database refuses its writes, the others priced in halves", async () => {
    const ids = await send(4)
    await query(app, `CREATE FUNCTION refuse_one_usage_row() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.signal_id = '${ids[2]}' THEN RAISE EXCEPTION 'refused by the test'; END IF;
        RETURN NEW;
      END $$`)
    await query(app, `CREATE TRIGGER refuse_one_usage_row BEFORE INSERT ON usage_log
      FOR EACH ROW EXECUTE FUNCTION refuse_one_usage_row()`)
    try {
      const before = await creditsUsed()
      await drain(app)
      expect((await states(ids)).map((s) => [s.status, s.errorStatus, s.usageRows])).toEqual([
        ["PROCESSED", null, "1"],
        ["PROCESSED", null, "1"],
        ["FAILED", 500, "0"],
        ["PROCESSED", null, "1"]
      ])
      expect(Number(await creditsUsed()) - Number(before)).toBeCloseTo(3.6, 12)
      // Failed alone, in a transaction of its own after its batch's and its half's were rolled back: told all the same.
      const told = await refusedTold()
      expect(told).toContainEqual([ids[2], 1])
      expect(told.map(([rawId]) => rawId).filter((rawId) => ids.includes(rawId as string))).toEqual([ids[2]])
    } finally {
      await query(app, "DROP TRIGGER refuse_one_usage_row ON usage_log")
      await query(app, "DROP FUNCTION refuse_one_usage_row()")
    }
  })
})
