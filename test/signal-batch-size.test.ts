/**
 * The drain's batch size as docs/signals.md gives it: 1,000 signals unless `BILLING_SIGNAL_BATCH`
 * says otherwise; anything but a whole number of at least 1 stops the worker at its start.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit } from "effect"
import { SignalBatchSize } from "../src/signals/SignalProcessor.ts"

const withEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

describe("SignalBatchSize (BILLING_SIGNAL_BATCH)", () => {
  it.effect("is 1,000 when unset, and the whole number given otherwise", () =>
    Effect.gen(function*() {
      expect(yield* SignalBatchSize.pipe(withEnv({}))).toBe(1000)
      expect(yield* SignalBatchSize.pipe(withEnv({ BILLING_SIGNAL_BATCH: "250" }))).toBe(250)
      expect(yield* SignalBatchSize.pipe(withEnv({ BILLING_SIGNAL_BATCH: "1" }))).toBe(1)
    }))

  it.effect("refuses what is not a whole number of at least 1", () =>
    Effect.gen(function*() {
      for (const bad of ["abc", "1.5", "0", "-5"]) {
        const exit = yield* Effect.exit(SignalBatchSize.pipe(withEnv({ BILLING_SIGNAL_BATCH: bad })))
        expect(Exit.isFailure(exit), bad).toBe(true)
      }
    }))
})
