/**
 * Tests must not carry dates that expire: a literal date later than today
 * (for example a billingDate the service accepts only while it is in the
 * future) turns into a failure on the day it passes. Dates in the past are
 * fine as fixed historical values; anything that has to be in the future is
 * computed from the test's own clock.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const testDir = fileURLToPath(new URL(".", import.meta.url))

/** Every file under test/, subfolders included. */
const filesUnder = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name)) : [join(dir, entry.name)]
  ).sort()

/** YYYY-MM-DD not glued to other digits (so ids and long numbers do not count). */
const ISO_DATE = /(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)/g

const isCalendarDate = (year: number, month: number, day: number) => {
  const date = new Date(Date.UTC(year, month - 1, day))
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day
}

/** `line:column date` for each calendar date in `text` later than `today` (YYYY-MM-DD, UTC). */
const futureDatesIn = (text: string, today: string): Array<string> =>
  text.split("\n").flatMap((line, index) =>
    [...line.matchAll(ISO_DATE)]
      .filter(([date, year, month, day]) =>
        isCalendarDate(Number(year), Number(month), Number(day)) && date > today
      )
      .map((match) => `${index + 1}:${match.index + 1} ${match[0]}`)
  )

const isoDay = (date: Date) => date.toISOString().slice(0, 10)

describe("no absolute dates that expire", () => {
  it("finds no literal date later than today in any file under test/", () => {
    const today = isoDay(new Date())
    const files = filesUnder(testDir)
    expect(files.map((file) => relative(testDir, file))).toContain("no-absolute-dates.test.ts")
    const found = files.flatMap((file) =>
      futureDatesIn(readFileSync(file, "utf8"), today).map((where) => `test/${relative(testDir, file)}:${where}`)
    )
    expect(
      found,
      `literal dates later than ${today}; compute them from the test's clock instead:\n${found.join("\n")}`
    ).toEqual([])
  })

  it("flags a date after today and lets today, the past and non-dates pass", () => {
    const today = new Date()
    const tomorrow = isoDay(new Date(today.getTime() + 86_400_000))
    const nextYear = `${today.getUTCFullYear() + 1}-01-31T10:00:00.000Z`
    const text = [
      `billingDate: "${isoDay(today)}T00:00:00Z"`,
      `from: "2020-01-01", id: "x12020-01-019"`,
      `until: "${tomorrow}", again: "${nextYear}"`,
      `not a date: 2021-02-30`
    ].join("\n")
    expect(futureDatesIn(text, isoDay(today))).toEqual([
      `3:9 ${tomorrow}`,
      `3:30 ${nextYear.slice(0, 10)}`
    ])
  })
})
