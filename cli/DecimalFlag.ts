/**
 * Amount flags (`--price 0.05`, `--delta -12.5`, `--margin 20`): the text is
 * handed on as it was typed, a decimal string, so that it reaches BigDecimal
 * digit for digit instead of through a float. The schemas take it because the
 * CLI decodes with `acceptDecimalText` (src/schema.ts).
 */
import { InvalidArgumentError } from "commander"

const decimalText = /^-?(?:\d+(?:\.\d*)?|\.\d+)$/

export const decimalFlag = (value: string): string => {
  const text = value.trim()
  if (!decimalText.test(text)) throw new InvalidArgumentError(`not a decimal number (such as 0.05): ${value}`)
  return text
}
