/** A URL on one line, however narrow the terminal: a wrapped link breaks when copied. */
import { Box, Text } from "./ink.ts"

export function UrlLine(props: { readonly label: string; readonly url: string }) {
  return (
    <Box width={props.label.length + props.url.length + 2}>
      <Text>
        <Text color="cyan">{props.label}</Text>  {props.url}
      </Text>
    </Box>
  )
}
