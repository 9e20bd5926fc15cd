/**
 * The portal's usage chart: customer cost per day (or per month, over a long
 * range), one stacked bar a period with a segment per meter, drawn on the
 * server as SVG (no client code). Geometry is display arithmetic on numbers;
 * the amounts in labels and the table come from the exact decimals.
 */
import { BigDecimal } from "effect"
import { sum, toNumber, ZERO } from "../money.ts"
import type { DailyUsage } from "../usage/UsageLog.ts"
import type { Formats } from "./Format.ts"
import { type Html, html, trusted } from "./Html.ts"

const labelOf = (granularity: Granularity, key: string, formats: Formats) =>
  granularity === "month" ? formats.shortMonth(key) : formats.shortDay(key)

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

/**
 * The chart is drawn twice, each laid out for the width it is shown at, and
 * the stylesheet shows one: a wide one for a desktop and a narrow one for a
 * phone (below 641 px). One drawing scaled down to a phone shrank its text
 * with it, and a larger font then ran the day labels together ("Dec 10Dec
 * 14") and pushed the tick labels into the rotated axis title. Each layout's
 * text is 12 units and the layout is about as wide as it is shown, so text
 * keeps its size; the day labels are spaced by their estimated width, the
 * value axis's margin fits its longest tick label, and the axis title sits
 * above the ticks, level, where it cannot cross them.
 */
export interface ChartLayout {
  readonly name: "wide" | "narrow"
  readonly width: number
  readonly height: number
}

export const chartLayouts: ReadonlyArray<ChartLayout> = [
  { name: "wide", width: 640, height: 260 },
  { name: "narrow", width: 330, height: 230 }
]

const fontSize = 12
/** A generous estimate of a character's width in the UI font at `fontSize` (digits are about 0.55 em). */
const charWidth = fontSize * 0.62
const textWidth = (text: string) => text.length * charWidth
/** The least space between two day labels. */
const labelGap = 10

/**
 * Which days carry a label: every `step`-th from the first, `step` the
 * fewest days whose bands hold a label and a gap, and none that would run
 * past either edge of the drawing.
 */
export const labelledDays = (
  count: number,
  band: number,
  left: number,
  width: number,
  labelWidth: number
): Array<number> => {
  if (count === 0) return []
  const step = Math.max(1, Math.ceil((labelWidth + labelGap) / band))
  const indices: Array<number> = []
  for (let index = 0; index < count; index += step) {
    const centre = left + index * band + band / 2
    if (centre - labelWidth / 2 >= 0 && centre + labelWidth / 2 <= width) indices.push(index)
  }
  return indices
}

/** What one bar stands for: a UTC day (its key YYYY-MM-DD) or a UTC month (YYYY-MM). */
export type Granularity = "day" | "month"

const words: Record<Granularity, { readonly per: string; readonly axis: string; readonly attribute: string }> = {
  day: { per: "day", axis: "Day (UTC)", attribute: "data-day" },
  month: { per: "month", axis: "Month (UTC)", attribute: "data-month" }
}

interface Series {
  readonly granularity: Granularity
  readonly days: ReadonlyArray<string>
  readonly meters: ReadonlyArray<string>
  readonly costOf: (day: string, meter: string) => BigDecimal.BigDecimal
  readonly peak: number
  readonly currency: string
  readonly summary: string
}

const drawing = (layout: ChartLayout, series: Series, formats: Formats): Html => {
  const { days, meters, costOf, currency } = series
  const { max, step } = niceScale(series.peak)
  const ticks = Array.from({ length: Math.round(max / step) + 1 }, (_, i) => i * step)
  const tickLabels = ticks.map((tick) => formats.approxMoney(tick, currency))
  const margin = {
    top: 30,
    right: 8,
    bottom: 44,
    left: Math.ceil(Math.max(...tickLabels.map(textWidth)) + 10)
  }
  const { height, width } = layout
  const plotWidth = width - margin.left - margin.right
  const plotHeight = height - margin.top - margin.bottom
  const band = plotWidth / Math.max(days.length, 1)
  const barWidth = Math.max(2, band * 0.7)
  const y = (value: number) => margin.top + plotHeight - (value / max) * plotHeight
  const dayLabels = days.map((day) => labelOf(series.granularity, day, formats))
  const { attribute, axis, per } = words[series.granularity]
  const labelled = new Set(labelledDays(days.length, band, margin.left, width, Math.max(0, ...dayLabels.map(textWidth))))
  const id = (what: string) => `chart-${what}-${layout.name}`

  const grid = ticks.map((tick, index) =>
    html`<line class="grid" x1="${margin.left}" x2="${width - margin.right}" y1="${y(tick)}" y2="${y(tick)}"/>
<text class="tick y" x="${margin.left - 6}" y="${y(tick) + 4}" text-anchor="end">${tickLabels[index]}</text>`
  )
  const bars = days.map((day, index) => {
    const x = margin.left + index * band + (band - barWidth) / 2
    let base = 0
    const segments = meters.map((meter) => {
      const cost = costOf(day, meter)
      if (!BigDecimal.isPositive(cost)) return html``
      const value = toNumber(cost)
      const segment = html`<rect class="bar" ${trusted(attribute)}="${day}" data-meter="${meter}" x="${x.toFixed(2)}" y="${y(base + value).toFixed(2)}" width="${barWidth.toFixed(2)}" height="${((value / max) * plotHeight).toFixed(2)}" fill="${meterColours[meter]}"><title>${dayLabels[index]}, ${meterLabels[meter]}: ${formats.preciseMoney(cost, currency)}</title></rect>`
      base += value
      return segment
    })
    const label = labelled.has(index)
      ? html`<text class="tick x" x="${(margin.left + index * band + band / 2).toFixed(2)}" y="${height - margin.bottom + 20}" text-anchor="middle">${dayLabels[index]}</text>`
      : html``
    return html`${segments}${label}`
  })
  return html`<svg class="${layout.name}" viewBox="0 0 ${width} ${height}" role="img" aria-labelledby="${id("title")} ${id("desc")}" preserveAspectRatio="xMidYMid meet">
<title id="${id("title")}">Usage cost per ${per}</title>
<desc id="${id("desc")}">${series.summary}</desc>
<text class="axis-title y" x="0" y="13">Cost (${currency})</text>
${grid}
<line class="axis" x1="${margin.left}" x2="${width - margin.right}" y1="${y(0)}" y2="${y(0)}"/>
${bars}
<text class="axis-title x" x="${margin.left + plotWidth / 2}" y="${height - 4}" text-anchor="middle">${axis}</text>
</svg>`
}

/**
 * The usage of `days` as a stacked bar chart with its legend, caption and
 * table; a range with no cost to show says so instead of drawing empty axes
 * (an empty cycle once came out on a $0 to $4 axis, the scale of nothing).
 */
export const usageChart = (
  days: ReadonlyArray<string>,
  rows: ReadonlyArray<DailyUsage>,
  currency: string,
  formats: Formats,
  granularity: Granularity = "day"
): Html => {
  const { axis, per } = words[granularity]
  const label = (day: string) => labelOf(granularity, day, formats)
  const meters = meterOrder.filter((meter) => rows.some((row) => row.meter === meter))
  const costOf = (day: string, meter: string) =>
    rows.find((row) => row.day === day && row.meter === meter)?.customerCost ?? ZERO
  const totals = days.map((day) => sum(rows.filter((row) => row.day === day).map((row) => row.customerCost)))
  const total = sum(totals)
  const peak = Math.max(0, ...totals.map(toNumber))
  const first = days[0]
  const last = days[days.length - 1]
  if (first === undefined || last === undefined || !(peak > 0)) {
    return html`<p class="muted" data-testid="no-usage">No usage to chart in this period yet.</p>`
  }
  const summary = `Customer cost per ${per} from ${label(first)} to ${label(last)} (UTC ${per}s), ` +
    `${formats.money(total, currency)} in all.`
  const series: Series = { granularity, days, meters, costOf, peak, currency, summary }

  return html`<figure class="chart">
<div class="legend" aria-hidden="true">${
    meters.map((meter) => html`<span><i style="background:${meterColours[meter]}"></i>${meterLabels[meter]}</span>`)
  }</div>
<div class="scroll">${chartLayouts.map((layout) => drawing(layout, series, formats))}</div>
<figcaption>${summary}</figcaption>
<details><summary>Show as a table</summary><div class="scroll"><table>
<thead><tr><th scope="col">${axis}</th>${meters.map((meter) => html`<th scope="col" class="num">${meterLabels[meter]}</th>`)}<th scope="col" class="num">Total</th></tr></thead>
<tbody>${
    days.flatMap((day, index) =>
      BigDecimal.isZero(totals[index]!)
        ? []
        : [html`<tr><th scope="row">${label(day)}</th>${
          meters.map((meter) => html`<td class="num">${formats.preciseMoney(costOf(day, meter), currency)}</td>`)
        }<td class="num">${formats.preciseMoney(totals[index]!, currency)}</td></tr>`]
    )
  }</tbody></table></div></details>
</figure>`
}
