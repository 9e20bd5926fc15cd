/** A plain table for operators: a header row, aligned columns, optional totals. */
import { Box, Text } from "ink"

export interface Column<Row> {
  readonly header: string
  readonly value: (row: Row) => string
  readonly align?: "left" | "right"
}

export function Table<Row>(props: {
  readonly title?: string
  readonly columns: ReadonlyArray<Column<Row>>
  readonly rows: ReadonlyArray<Row>
  readonly footer?: string
}) {
  const cells = props.rows.map((row) => props.columns.map((column) => column.value(row)))
  const widths = props.columns.map((column, i) => Math.max(column.header.length, ...cells.map((row) => row[i]!.length)))
  const pad = (text: string, i: number) =>
    props.columns[i]!.align === "right" ? text.padStart(widths[i]!) : text.padEnd(widths[i]!)
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
