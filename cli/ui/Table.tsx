/**
 * A plain table for operators: a header row, aligned columns, optional totals.
 * In a terminal the columns are cut to fit its width (widest first, with an
 * ellipsis) so a row never wraps; on a pipe nothing is cut (see cli/Output.ts).
 * Ids, URLs, statuses, numbers and amounts (right-aligned columns) are never
 * cut: a `0.00…` or `PEND…` says nothing, and an id or a link cut short cannot
 * be copied. When they alone do not fit, each record is shown as a block of
 * `HEADER  value` lines instead, whole.
 */
import { Box, Text } from "./ink.ts"
import { isInteractive, terminalColumns, truncate } from "../Output.ts"

const GAP = 2
/** No column is cut below this many characters. */
const MIN_WIDTH = 4

/** Column widths that fit `available` characters, taking from the widest cuttable column first. */
export const fitWidths = (
  widths: ReadonlyArray<number>,
  available: number,
  whole: ReadonlyArray<boolean> = []
): Array<number> => {
  const fitted = [...widths]
  let excess = fitted.reduce((sum, width) => sum + width, 0) + GAP * Math.max(0, fitted.length - 1) - available
  while (excess > 0) {
    let widest = -1
    for (let i = 0; i < fitted.length; i++) {
      if (!whole[i] && (widest < 0 || fitted[i]! > fitted[widest]!)) widest = i
    }
    if (widest < 0 || fitted[widest]! <= MIN_WIDTH) break
    fitted[widest]!--
    excess--
  }
  return fitted
}

export interface Column<Row> {
  readonly header: string
  readonly value: (row: Row) => string
  readonly align?: "left" | "right"
  /** Never cut to fit a terminal: a value that is useless in part (a secret shown once, a URL to open). */
  readonly whole?: boolean
}

/**
 * Kept whole by default: ids and invoice numbers (what an operator copies into
 * the next command), URLs (what a person opens), statuses, and every
 * right-aligned column (amounts, quantities, counts): a value cut short is a
 * wrong value. A column whose values name an id among other words (`evt_...`
 * beside its type) is kept whole too: its id would be cut with the rest.
 */
export const isWhole = (column: Pick<Column<never>, "header" | "align" | "whole">, values: ReadonlyArray<string> = []) =>
  column.whole ??
    (column.align === "right" || /(^|\s)(ID|STATUS|NUMBER|URL)$/.test(column.header) || holdsIds(values) ||
      namesIds(values) || holdsUrls(values))

/** Service ids (`cus_01m8...`), whatever the column's header (CUSTOMER, INVOICE, ENDPOINT...). */
const idPattern = /^[a-z]{2,5}_[0-9a-z]{12,}$/
const isBlank = (value: string) => value === "-" || value === ""
const holdsIds = (values: ReadonlyArray<string>) =>
  values.some((value) => idPattern.test(value)) && values.every((value) => isBlank(value) || idPattern.test(value))

/** A value with an id as one of its words (`invoice.created evt_01m8...`). */
const namesIds = (values: ReadonlyArray<string>) =>
  values.some((value) => value.includes(" ") && value.split(/\s+/).some((word) => idPattern.test(word)))

/** Links (`https://hooks.example.com/billing`), whatever the column's header (ENDPOINT, LINK...). */
const urlPattern = /^https?:\/\/\S+$/
const holdsUrls = (values: ReadonlyArray<string>) =>
  values.some((value) => urlPattern.test(value)) && values.every((value) => isBlank(value) || urlPattern.test(value))

const fits = (widths: ReadonlyArray<number>, available: number) =>
  widths.reduce((sum, width) => sum + width, 0) + GAP * Math.max(0, widths.length - 1) <= available

export function Table<Row>(props: {
  readonly title?: string
  readonly columns: ReadonlyArray<Column<Row>>
  readonly rows: ReadonlyArray<Row>
  readonly footer?: string
}) {
  const cells = props.rows.map((row) => props.columns.map((column) => column.value(row)))
  const natural = props.columns.map((column, i) => Math.max(column.header.length, ...cells.map((row) => row[i]!.length)))
  // Ink keeps one column of a terminal free (its last character would wrap on some terminals).
  const available = terminalColumns() - 1
  const whole = props.columns.map((column, i) => isWhole(column, cells.map((row) => row[i]!)))
  const widths = isInteractive({}) ? fitWidths(natural, available, whole) : natural
  if (isInteractive({}) && !fits(widths, available) && props.rows.length > 0) {
    return <Blocks title={props.title} headers={props.columns.map((column) => column.header)} cells={cells} footer={props.footer} />
  }
  const pad = (text: string, i: number) => {
    const cell = truncate(text, widths[i]!)
    return props.columns[i]!.align === "right" ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)
  }
  return (
    <Box flexDirection="column">
      {props.title ? <Text bold>{props.title}</Text> : null}
      <Text bold color="cyan">{props.columns.map((column, i) => pad(column.header, i)).join("  ")}</Text>
      {cells.map((row, r) => <Text key={r}>{row.map(pad).join("  ")}</Text>)}
      {props.rows.length === 0 ? <Text dimColor>(none)</Text> : null}
      {props.footer ? <Text dimColor>{props.footer}</Text> : null}
    </Box>
  )
}

/** Each record as a block of `HEADER  value` lines, a blank line between records: nothing is cut. */
function Blocks(props: {
  readonly title?: string | undefined
  readonly headers: ReadonlyArray<string>
  readonly cells: ReadonlyArray<ReadonlyArray<string>>
  readonly footer?: string | undefined
}) {
  const width = Math.max(0, ...props.headers.map((header) => header.length))
  return (
    <Box flexDirection="column">
      {props.title ? <Text bold>{props.title}</Text> : null}
      {props.cells.map((row, r) => (
        <Box key={r} flexDirection="column" marginTop={r === 0 ? 0 : 1}>
          {row.map((value, i) => (
            <Text key={i}>
              <Text bold color="cyan">{props.headers[i]!.padEnd(width)}</Text>  {value}
            </Text>
          ))}
        </Box>
      ))}
      {props.footer ? <Text dimColor>{props.footer}</Text> : null}
    </Box>
  )
}

/** One record as `field  value` lines. */
export function Details(props: { readonly title?: string; readonly fields: ReadonlyArray<readonly [string, string]> }) {
  const width = Math.max(0, ...props.fields.map(([name]) => name.length))
  return (
    <Box flexDirection="column">
      {props.title ? <Text bold>{props.title}</Text> : null}
      {props.fields.map(([name, value]) => (
        <Text key={name}>
          <Text color="cyan">{name.padEnd(width)}</Text>  {value}
        </Text>
      ))}
    </Box>
  )
}
