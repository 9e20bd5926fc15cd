/**
 * HTML from plain template functions. `html` escapes every interpolated value
 * unless it is already `Html` (made by `html` itself, or `trusted` for our own
 * constants), so a customer's name or an invoice line can never become markup.
 */

export class Html {
  constructor(readonly text: string) {}
  toString() {
    return this.text
  }
}

export type HtmlValue = Html | string | number | null | undefined | false | ReadonlyArray<HtmlValue>

const entities: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" }

export const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => entities[c]!)

const render = (value: HtmlValue): string => {
  if (value === null || value === undefined || value === false) return ""
  if (value instanceof Html) return value.text
  if (Array.isArray(value)) return value.map(render).join("")
  return escapeHtml(String(value))
}

/** The tagged template: `html\`<td>${name}</td>\`` escapes `name`. */
export const html = (strings: TemplateStringsArray, ...values: ReadonlyArray<HtmlValue>): Html =>
  new Html(strings.reduce((out, part, index) => out + part + (index < values.length ? render(values[index]!) : ""), ""))

/** Markup we wrote ourselves (the stylesheet, the script): never anything from data. */
export const trusted = (text: string) => new Html(text)
