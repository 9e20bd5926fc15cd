/**
 * The portal's usage chart: customer cost per day, one stacked bar a day with
 * a segment per meter, drawn on the server as SVG (no client code). Geometry
 * is display arithmetic on numbers; the amounts in labels and the table come
 * from the exact decimals.
 */
import { BigDecimal } from "effect"
import { sum, toNumber, ZERO } from "../money.ts"
import type { DailyUsage } from "../usage/UsageLog.ts"
import type { Formats } from "./Format.ts"
import { type Html, html } from "./Html.ts"

export const meterLabels: Record<string, string> = {
  CREDIT: "Credits",
  OUTCOME: "Outcomes",
  OUTCOME_STEP: "Outcome steps",
  UNIT: "Units",
  WALLET: "Wallet",
  COMPOSITE: "Composites"
}

/** Distinct on white and for the common colour-vision deficiencies (Okabe-Ito based). */
const meterColours: Record<string, string> = {
  CREDIT: "#0072B2",
  OUTCOME: "#D55E00",
  OUTCOME_STEP: "#CC79A7",
  UNIT: "#009E73",
  WALLET: "#E69F00",
  COMPOSITE: "#56B4E9"
}

const meterOrder = Object.keys(meterLabels)

/** A round axis maximum above `value` (1, 2, 2.5 or 5 times a power of ten) and its tick step. */
export const niceScale = (value: number, ticks = 4): { readonly max: number; readonly step: number } => {
  if (!(value > 0)) return { max: ticks, step: 1 }
  const rough = value / ticks
  const power = 10 ** Math.floor(Math.log10(rough))
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s * ticks >= value)!
  return { max: step * ticks, step }
}

const width = 640
const height = 260
const margin = { top: 12, right: 10, bottom: 44, left: 80 }

export const usageChart = (
  days: ReadonlyArray<string>,
  rows: ReadonlyArray<DailyUsage>,
  currency: string,
  formats: Formats
): Html => {
  const meters = meterOrder.filter((meter) => rows.some((row) => row.meter === meter))
  const costOf = (day: string, meter: string) =>
    rows.find((row) => row.day === day && row.meter === meter)?.customerCost ?? ZERO
  const totals = days.map((day) => sum(rows.filter((row) => row.day === day).map((row) => row.customerCost)))
  const total = sum(totals)
  const peak = Math.max(0, ...totals.map(toNumber))
  const { max, step } = niceScale(peak)
  const plotWidth = width - margin.left - margin.right
  const plotHeight = height - margin.top - margin.bottom
  const band = plotWidth / Math.max(days.length, 1)
  const barWidth = Math.max(2, band * 0.7)
  const y = (value: number) => margin.top + plotHeight - (value / max) * plotHeight
  const labelEvery = Math.ceil(days.length / 8)

  const ticks = Array.from({ length: Math.round(max / step) + 1 }, (_, i) => i * step)
  const grid = ticks.map((tick) =>
    html`<line class="grid" x1="${margin.left}" x2="${width - margin.right}" y1="${y(tick)}" y2="${y(tick)}"/>
<text class="tick" x="${margin.left - 6}" y="${y(tick) + 4}" text-anchor="end">${formats.approxMoney(tick, currency)}</text>`
  )
  const bars = days.map((day, index) => {
    const x = margin.left + index * band + (band - barWidth) / 2
    let base = 0
    const segments = meters.map((meter) => {
      const cost = costOf(day, meter)
      if (!BigDecimal.isPositive(cost)) return html``
      const value = toNumber(cost)
      const segment = html`<rect class="bar" data-day="${day}" data-meter="${meter}" x="${x.toFixed(2)}" y="${y(base + value).toFixed(2)}" width="${barWidth.toFixed(2)}" height="${((value / max) * plotHeight).toFixed(2)}" fill="${meterColours[meter]}"><title>${formats.shortDay(day)}, ${meterLabels[meter]}: ${formats.preciseMoney(cost, currency)}</title></rect>`
      base += value
      return segment
    })
    const label = index % labelEvery === 0
      ? html`<text class="tick" x="${(margin.left + index * band + band / 2).toFixed(2)}" y="${height - margin.bottom + 20}" text-anchor="middle">${formats.shortDay(day)}</text>`
      : html``
    return html`${segments}${label}`
  })
  const first = days[0]
  const last = days[days.length - 1]
  const summary = first === undefined || last === undefined
    ? "No days to show."
    : `Customer cost per day from ${formats.shortDay(first)} to ${formats.shortDay(last)} (UTC days), ${formats.money(total, currency)} in all.`

  return html`<figure class="chart">
<div class="legend" aria-hidden="true">${
    meters.length === 0
      ? html`<span class="muted">No usage in this period yet.</span>`
      : meters.map((meter) => html`<span><i style="background:${meterColours[meter]}"></i>${meterLabels[meter]}</span>`)
  }</div>
<div class="scroll"><svg viewBox="0 0 ${width} ${height}" role="img" aria-labelledby="chart-title chart-desc" preserveAspectRatio="xMidYMid meet">
<title id="chart-title">Usage cost per day</title>
<desc id="chart-desc">${summary}</desc>
${grid}
<line class="axis" x1="${margin.left}" x2="${width - margin.right}" y1="${y(0)}" y2="${y(0)}"/>
${bars}
<text class="axis-title" x="${margin.left + plotWidth / 2}" y="${height - 4}" text-anchor="middle">Day (UTC)</text>
<text class="axis-title" transform="translate(16 ${margin.top + plotHeight / 2}) rotate(-90)" text-anchor="middle">Cost (${currency})</text>
</svg></div>
<figcaption>${summary}</figcaption>
<details><summary>Show as a table</summary><div class="scroll"><table>
<thead><tr><th scope="col">Day (UTC)</th>${meters.map((meter) => html`<th scope="col" class="num">${meterLabels[meter]}</th>`)}<th scope="col" class="num">Total</th></tr></thead>
<tbody>${
    days.flatMap((day, index) =>
      BigDecimal.isZero(totals[index]!)
        ? []
        : [html`<tr><th scope="row">${formats.shortDay(day)}</th>${
          meters.map((meter) => html`<td class="num">${formats.preciseMoney(costOf(day, meter), currency)}</td>`)
        }<td class="num">${formats.preciseMoney(totals[index]!, currency)}</td></tr>`]
    )
  }</tbody></table></div></details>
</figure>`
}

