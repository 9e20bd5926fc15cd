/**
 * MONTHLY cycle arithmetic, in UTC. Cycles are anchored on the purchase's start:
 * cycle n starts n months after it, on the anchor's day of the month or, in a
 * shorter month, on that month's last day (a start on Jan 31 renews on Feb 28,
 * or Feb 29 in a leap year, then Mar 31). Always counting from the anchor, not
 * from the previous cycle, keeps the 31st from drifting to the 28th for good.
 */

const daysInMonth = (year: number, month: number) => new Date(Date.UTC(year, month + 1, 0)).getUTCDate()

/** The start of cycle `index` (0 is the anchor itself). */
export const cycleStart = (anchor: Date, index: number): Date => {
  const monthIndex = anchor.getUTCMonth() + index
  const year = anchor.getUTCFullYear() + Math.floor(monthIndex / 12)
  const month = ((monthIndex % 12) + 12) % 12
  const day = Math.min(anchor.getUTCDate(), daysInMonth(year, month))
  return new Date(Date.UTC(
    year,
    month,
    day,
    anchor.getUTCHours(),
    anchor.getUTCMinutes(),
    anchor.getUTCSeconds(),
    anchor.getUTCMilliseconds()
  ))
}

export interface CyclePeriod {
  readonly index: number
  readonly start: Date
  readonly end: Date
}

export const cyclePeriod = (anchor: Date, index: number): CyclePeriod => ({
  index,
  start: cycleStart(anchor, index),
  end: cycleStart(anchor, index + 1)
})
