/**
 * The history job's rules alone (docs/operations.md, "History: retention of
 * the inbox and partitions of the usage log"): its settings as the environment
 * gives them, the retention window's cutoff and the id bound that limits the
 * scan of an organisation's inbox, and which usage-log months are detached.
 * The instants are fixed moments in the past, passed as arguments.
 */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { historySettingsOf } from "../../src/history/HistoryJob.ts"
import { suffixOf } from "../../src/ids.ts"
import { passBounds, retentionCutoff, SETTLE_MS, signalIdBefore } from "../../src/signals/Retention.ts"
import { monthOfPartition, monthsToDetach } from "../../src/usage/Partitions.ts"

const NOW = new Date("2026-03-15T12:00:00.000Z")
const DAY = 86_400_000

describe("the history settings", () => {
  const refused = (env: Record<string, string>) => {
    const settings = historySettingsOf(env)
    return Either.isLeft(settings) ? settings.left : "accepted"
  }

  it("default to 35 days in the inbox and 24 months of the usage log", () => {
    expect(historySettingsOf({})).toEqual(Either.right({ signalRetentionDays: 35, usageLogMonths: 24 }))
    expect(historySettingsOf({ BILLING_SIGNAL_RETENTION_DAYS: " ", BILLING_USAGE_LOG_MONTHS: "" }))
      .toEqual(Either.right({ signalRetentionDays: 35, usageLogMonths: 24 }))
  })

  it("take whole numbers, 0 turning each part off", () => {
    expect(historySettingsOf({ BILLING_SIGNAL_RETENTION_DAYS: "90", BILLING_USAGE_LOG_MONTHS: "0" }))
      .toEqual(Either.right({ signalRetentionDays: 90, usageLogMonths: 0 }))
    expect(historySettingsOf({ BILLING_SIGNAL_RETENTION_DAYS: "0", BILLING_USAGE_LOG_MONTHS: "1" }))
      .toEqual(Either.right({ signalRetentionDays: 0, usageLogMonths: 1 }))
    expect(historySettingsOf({ BILLING_SIGNAL_RETENTION_DAYS: "1", BILLING_USAGE_LOG_MONTHS: "1200" }))
      .toEqual(Either.right({ signalRetentionDays: 1, usageLogMonths: 1200 }))
    expect(historySettingsOf({ BILLING_SIGNAL_RETENTION_DAYS: "36500" }))
      .toEqual(Either.right({ signalRetentionDays: 36_500, usageLogMonths: 24 }))
  })

  it("refuse anything else, naming the variable, what it takes and what it got", () => {
    expect(refused({ BILLING_SIGNAL_RETENTION_DAYS: "-1" })).toBe(
      "BILLING_SIGNAL_RETENTION_DAYS must be a whole number of days from 1 to 36500, or 0 to keep every signal in the inbox; got \"-1\""
    )
    expect(refused({ BILLING_SIGNAL_RETENTION_DAYS: "1.5" })).toContain("got \"1.5\"")
    expect(refused({ BILLING_SIGNAL_RETENTION_DAYS: "36501" })).toContain("BILLING_SIGNAL_RETENTION_DAYS")
    expect(refused({ BILLING_SIGNAL_RETENTION_DAYS: "35d" })).toContain("BILLING_SIGNAL_RETENTION_DAYS")
    expect(refused({ BILLING_USAGE_LOG_MONTHS: "1201" })).toBe(
      "BILLING_USAGE_LOG_MONTHS must be a whole number of months from 1 to 1200, or 0 to detach none; got \"1201\""
    )
    expect(refused({ BILLING_USAGE_LOG_MONTHS: "twelve" })).toContain("BILLING_USAGE_LOG_MONTHS")
  })
})

describe("the retention window", () => {
  it("counts back whole days from the job's now", () => {
    expect(retentionCutoff(NOW, 35).toISOString()).toBe("2026-02-08T12:00:00.000Z")
    expect(retentionCutoff(NOW, 1).getTime()).toBe(NOW.getTime() - DAY)
  })

  it("bounds the scan by the id of the cutoff's millisecond: every id made before it sorts below", () => {
    const cutoff = retentionCutoff(NOW, 35)
    const bound = signalIdBefore(cutoff)
    const madeAt = (ms: number, high: number, low: number) => `sig_${suffixOf(ms, { high, low })}`
    const largest = 2 ** 40 - 1
    expect(madeAt(cutoff.getTime() - 1, largest, largest) < bound).toBe(true)
    expect(madeAt(cutoff.getTime(), 0, 0)).toBe(bound)
    expect(madeAt(cutoff.getTime(), 0, 1) > bound).toBe(true)
    expect(madeAt(cutoff.getTime() + 1, 0, 0) > bound).toBe(true)
  })

  it("settles a copy a minute before it leaves the inbox", () => {
    expect(SETTLE_MS).toBe(60_000)
    expect(passBounds(NOW, 35)).toEqual({
      cutoff: new Date("2026-02-08T12:00:00.000Z"),
      cutoffId: signalIdBefore(new Date("2026-02-08T12:00:00.000Z")),
      archivedAt: NOW,
      settledBefore: new Date("2026-03-15T11:59:00.000Z")
    })
  })
})

describe("the usage log's months", () => {
  it("are read from the partitions' names, and nothing else is one", () => {
    expect(monthOfPartition("usage_log_2024_01")).toEqual(new Date("2024-01-01T00:00:00.000Z"))
    expect(monthOfPartition("usage_log_2024_12")).toEqual(new Date("2024-12-01T00:00:00.000Z"))
    for (const name of ["usage_log_default", "usage_log_2024_13", "usage_log_2024_00", "usage_log_2024_1", "x_usage_log_2024_01"]) {
      expect(monthOfPartition(name), name).toBeUndefined()
    }
  })

  it("keep the current month and the months kept before it attached; older ones detach, oldest first", () => {
    const names = ["usage_log_default", "usage_log_2026_04", "usage_log_2026_03", "usage_log_2026_02", "usage_log_2026_01",
      "usage_log_2025_12", "usage_log_2024_03", "usage_log_2024_02"]
    expect(monthsToDetach(names, NOW, 24)).toEqual(["usage_log_2024_02"])
    expect(monthsToDetach(names, NOW, 2)).toEqual(["usage_log_2024_02", "usage_log_2024_03", "usage_log_2025_12"])
    expect(monthsToDetach(names, NOW, 1)).toEqual(["usage_log_2024_02", "usage_log_2024_03", "usage_log_2025_12", "usage_log_2026_01"])
    expect(monthsToDetach(names, NOW, 0)).toEqual([])
  })

  it("count months in UTC: the first instant of a month already belongs to it", () => {
    const names = ["usage_log_2026_01", "usage_log_2026_02"]
    expect(monthsToDetach(names, new Date("2026-03-31T23:59:59.999Z"), 1)).toEqual(["usage_log_2026_01"])
    expect(monthsToDetach(names, new Date("2026-04-01T00:00:00.000Z"), 1)).toEqual(["usage_log_2026_01", "usage_log_2026_02"])
    expect(monthsToDetach(["usage_log_2025_12"], new Date("2026-01-01T00:00:00.000Z"), 1)).toEqual([])
  })
})
