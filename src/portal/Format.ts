/**
 * Numbers and dates as a person reads them. Money is formatted by currency
 * from the exact decimal's text (Intl.NumberFormat takes a decimal string and
 * rounds it itself), never through a float. Dates are written in UTC and
 * carried in `<time datetime>`; the page's script rewrites them in the
 * browser's time zone when it has one.
 */
import { BigDecimal } from "effect"
import { type Decimal, ONE, roundTo, toSql } from "../money.ts"
import { type Html, html } from "./Html.ts"

// Intl takes a decimal string exactly (ECMA-402 NumberFormat v3); the lib types predate it.
const exact = (value: Decimal) => toSql(value) as unknown as number

/** The first language of Accept-Language this runtime can format, else en-US. */
export const localeOf = (acceptLanguage: string | undefined): string => {
  for (const part of (acceptLanguage ?? "").split(",")) {
    const tag = part.split(";")[0]!.trim()
    if (tag === "" || tag === "*") continue
    try {
      const [supported] = Intl.NumberFormat.supportedLocalesOf(tag)
      if (supported !== undefined) return supported
    } catch {
      // not a language tag
    }
  }
  return "en-US"
}

/**
 * Never "-$0.00": an amount that rounds to zero shows no sign (ECMA-402's
 * `signDisplay: "negative"` leaves negative zero unsigned; the lib types predate it).
 */
const noNegativeZero = { signDisplay: "negative" } as unknown as Intl.NumberFormatOptions

/** Whether `value` shows as a negative amount in cents: -0.004 shows as 0.00, neither negative nor red. */
export const isNegativeInCents = (value: Decimal): boolean => BigDecimal.isNegative(roundTo(value, 2))

export interface Formats {
  readonly locale: string
  /** An amount in cents, as on an invoice's totals. */
  readonly money: (value: Decimal, currency: string) => string
  /** An amount with its sub-cent digits (up to 6), as on usage rows and unit prices. */
  readonly preciseMoney: (value: Decimal, currency: string) => string
  /** A display-only amount (chart axis ticks). */
  readonly approxMoney: (value: number, currency: string) => string
  readonly quantity: (value: Decimal) => string
  readonly date: (value: Date) => Html
  readonly dateTime: (value: Date) => Html
  /** Month, day and time, for table rows. */
  readonly shortDateTime: (value: Date) => Html
  readonly shortDay: (day: string) => string
  /** A UTC month (YYYY-MM), short: "Jan 2026". */
  readonly shortMonth: (month: string) => string
}

export const formatsFor = (locale: string): Formats => {
  const currencyFormats = new Map<string, Intl.NumberFormat>()
  const currencyFormat = (currency: string, maximumFractionDigits: number) => {
    const key = `${currency}/${maximumFractionDigits}`
    let format = currencyFormats.get(key)
    if (format === undefined) {
      format = new Intl.NumberFormat(locale, {
        style: "currency",
        currency,
        minimumFractionDigits: 2,
        maximumFractionDigits,
        ...noNegativeZero
      })
      currencyFormats.set(key, format)
    }
    return format
  }
  const large = new Intl.NumberFormat(locale, { maximumFractionDigits: 2, ...noNegativeZero })
  const small = new Intl.NumberFormat(locale, { maximumSignificantDigits: 3, ...noNegativeZero })
  const dayFormat = new Intl.DateTimeFormat(locale, { timeZone: "UTC", dateStyle: "medium" })
  const dateTimeFormat = new Intl.DateTimeFormat(locale, { timeZone: "UTC", dateStyle: "medium", timeStyle: "short" })
  const shortDateTimeFormat = new Intl.DateTimeFormat(locale, {
    timeZone: "UTC",
    month: "short",
    day: "numeric",
    hour: "numeric",
    minute: "2-digit"
  })
  const shortDayFormat = new Intl.DateTimeFormat(locale, { timeZone: "UTC", day: "numeric", month: "short" })
  const shortMonthFormat = new Intl.DateTimeFormat(locale, { timeZone: "UTC", month: "short", year: "numeric" })
  return {
    locale,
    money: (value, currency) => currencyFormat(currency, 2).format(exact(value)),
    preciseMoney: (value, currency) => currencyFormat(currency, 6).format(exact(value)),
    approxMoney: (value, currency) => currencyFormat(currency, value !== 0 && Math.abs(value) < 0.1 ? 4 : 2).format(value),
    quantity: (value) =>
      BigDecimal.greaterThanOrEqualTo(BigDecimal.abs(value), ONE) || BigDecimal.isZero(value)
        ? large.format(exact(value))
        : small.format(exact(value)),
    date: (value) => html`<time datetime="${value.toISOString()}" data-style="date">${dayFormat.format(value)}</time>`,
    dateTime: (value) =>
      html`<time datetime="${value.toISOString()}" data-style="datetime">${dateTimeFormat.format(value)} UTC</time>`,
    shortDateTime: (value) =>
      html`<time datetime="${value.toISOString()}" data-style="short">${shortDateTimeFormat.format(value)} UTC</time>`,
    shortDay: (day) => shortDayFormat.format(new Date(`${day}T00:00:00Z`)),
    shortMonth: (month) => shortMonthFormat.format(new Date(`${month}-01T00:00:00Z`))
  }
}
