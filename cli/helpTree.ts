/**
 * `billing --help` without loading the commands. The whole command tree
 * (names, descriptions, arguments, options, help texts) is written to
 * `dist/cli/commands.json` when the CLI is built (scripts/build.mjs, from the
 * real tree); a help request is answered by commander from a tree rebuilt
 * from that file, with no action, no service and no database module loaded.
 * Anything that is not a pure help request runs the real tree (cli/program.ts).
 *
 * A pure help request: no arguments; `help [command...]`; `[command...] --help`
 * (or `-h`); `--version` (or `-V`) alone. Every command named must exist, so
 * that commander's suggestions for a mistyped one come from the real tree.
 */
import { Argument, type Command, Option } from "commander"
import type { EventEmitter } from "node:events"
import { addUsageHints, newRoot } from "./commandLine.ts"

export interface ArgumentShape {
  readonly name: string
  readonly required: boolean
  readonly variadic: boolean
  readonly description: string
  readonly defaultValue?: unknown
  readonly defaultValueDescription?: string
  readonly choices?: ReadonlyArray<string>
}

export interface OptionShape {
  readonly flags: string
  readonly description: string
  readonly mandatory: boolean
  readonly hidden: boolean
  readonly defaultValue?: unknown
  readonly defaultValueDescription?: string
  readonly choices?: ReadonlyArray<string>
  readonly envVar?: string
  readonly presetArg?: unknown
}

export interface CommandShape {
  readonly name: string
  readonly aliases: ReadonlyArray<string>
  readonly description: string
  readonly summary: string
  readonly hidden: boolean
  /** Set only when the command chose its own usage line. */
  readonly usage?: string
  readonly version?: { readonly version: string; readonly flags: string; readonly description: string }
  readonly arguments: ReadonlyArray<ArgumentShape>
  readonly options: ReadonlyArray<OptionShape>
  /** Text added with `addHelpText`, by position (beforeAll, before, after, afterAll). */
  readonly helpText: Readonly<Record<string, string>>
  readonly commands: ReadonlyArray<CommandShape>
}

// commander keeps these on the instance without a public reader.
interface CommandInternals {
  readonly _hidden: boolean
  readonly _usage?: string
  readonly _version?: string
  readonly _versionOptionName?: string
}

const helpPositions = ["beforeAll", "before", "after", "afterAll"] as const

/** What each `addHelpText` listener writes, collected by calling it as commander would. */
const helpTextOf = (command: Command, position: string) => {
  let text = ""
  const context = { error: false, command, write: (chunk: string) => (text += chunk) }
  // A Command is an EventEmitter at runtime; its typings do not say so.
  for (const listener of (command as unknown as EventEmitter).listeners(`${position}Help`)) listener(context)
  return text
}

const withDefined = <A extends object>(shape: A): A =>
  Object.fromEntries(Object.entries(shape).filter(([, value]) => value !== undefined)) as A

/** The tree under `command`, as plain data. */
export const shapeOf = (command: Command): CommandShape => {
  const internals = command as unknown as CommandInternals
  const versionOption = internals._version !== undefined
    ? command.options.find((option) => option.attributeName() === internals._versionOptionName)
    : undefined
  const helpText: Record<string, string> = {}
  for (const position of helpPositions) {
    const text = helpTextOf(command, position)
    if (text !== "") helpText[position] = text.replace(/\n$/, "")
  }
  return withDefined({
    name: command.name(),
    aliases: command.aliases(),
    description: command.description(),
    summary: command.summary(),
    hidden: internals._hidden,
    usage: internals._usage,
    version: versionOption && internals._version !== undefined
      ? { version: internals._version, flags: versionOption.flags, description: versionOption.description }
      : undefined,
    arguments: command.registeredArguments.map((argument) =>
      withDefined({
        name: argument.name(),
        required: argument.required,
        variadic: argument.variadic,
        description: argument.description,
        defaultValue: argument.defaultValue,
        defaultValueDescription: argument.defaultValueDescription,
        choices: argument.argChoices
      })
    ),
    options: command.options.filter((option) => option !== versionOption).map((option) =>
      withDefined({
        flags: option.flags,
        description: option.description,
        mandatory: option.mandatory,
        hidden: option.hidden,
        defaultValue: option.defaultValue,
        defaultValueDescription: option.defaultValueDescription,
        choices: option.argChoices,
        envVar: option.envVar,
        presetArg: option.presetArg
      })
    ),
    helpText,
    commands: command.commands.map(shapeOf)
  })
}

const addShape = (command: Command, shape: CommandShape) => {
  command.description(shape.description)
  if (shape.summary !== "") command.summary(shape.summary)
  if (shape.aliases.length > 0) command.aliases([...shape.aliases])
  if (shape.usage !== undefined) command.usage(shape.usage)
  if (shape.version) command.version(shape.version.version, shape.version.flags, shape.version.description)
  for (const argument of shape.arguments) {
    const rebuilt = new Argument(
      argument.required ? `<${argument.name}${argument.variadic ? "..." : ""}>` : `[${argument.name}${argument.variadic ? "..." : ""}]`,
      argument.description
    )
    if (argument.choices) rebuilt.choices(argument.choices)
    if (argument.defaultValue !== undefined || argument.defaultValueDescription !== undefined) {
      rebuilt.default(argument.defaultValue, argument.defaultValueDescription)
    }
    command.addArgument(rebuilt)
  }
  for (const option of shape.options) {
    const rebuilt = new Option(option.flags, option.description).hideHelp(option.hidden).makeOptionMandatory(option.mandatory)
    if (option.choices) rebuilt.choices(option.choices)
    if (option.defaultValue !== undefined || option.defaultValueDescription !== undefined) {
      rebuilt.default(option.defaultValue, option.defaultValueDescription)
    }
    if (option.envVar !== undefined) rebuilt.env(option.envVar)
    if (option.presetArg !== undefined) rebuilt.preset(option.presetArg)
    command.addOption(rebuilt)
  }
  for (const position of helpPositions) {
    const text = shape.helpText[position]
    if (text !== undefined) command.addHelpText(position, text)
  }
  for (const sub of shape.commands) addShape(command.command(sub.name, { hidden: sub.hidden }), sub)
  return command
}

/** A tree that parses and prints help as the real one does, with no actions. */
export const programFromShape = (shape: CommandShape): Command => addUsageHints(addShape(newRoot(shape.name), shape))

const subcommandNamed = (shape: CommandShape, name: string) =>
  shape.commands.find((sub) => sub.name === name || sub.aliases.includes(name))

const isCommandPath = (shape: CommandShape, names: ReadonlyArray<string>): boolean => {
  let at: CommandShape | undefined = shape
  for (const name of names) {
    at = at && subcommandNamed(at, name)
    if (at === undefined) return false
  }
  return true
}

const helpFlags = ["--help", "-h"]

/**
 * Whether `args` have the form of a help request, before the tree is read:
 * every other command line starts without reading it.
 */
export const mayAskForHelp = (args: ReadonlyArray<string>): boolean =>
  args.length === 0 || args[0] === "help" || helpFlags.includes(args[args.length - 1]!) ||
  (args.length === 1 && args[0]!.startsWith("-"))

/** Whether `args` only ask for help or the version (see the header). */
export const isHelpRequest = (shape: CommandShape, args: ReadonlyArray<string>): boolean => {
  if (!mayAskForHelp(args)) return false
  if (args.length === 0) return true
  if (args.length === 1 && shape.version && shape.version.flags.split(/[ ,|]+/).includes(args[0]!)) return true
  if (args[0] === "help") return isCommandPath(shape, args.slice(1))
  return helpFlags.includes(args[args.length - 1]!) && isCommandPath(shape, args.slice(0, -1))
}
