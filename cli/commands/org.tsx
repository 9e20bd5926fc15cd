import type { Command } from "commander"
import { Effect } from "effect"
import { Text } from "../ui/ink.ts"
import { BadRequest } from "../../src/http/ApiErrors.ts"
import { ApiKeyName, ApiKeys, type ApiKey, keyStatusAt } from "../../src/organizations/ApiKeys.ts"
import {
  type BillingContactChange,
  billingContactOf,
  billingContactProblem,
  INVOICE_GRACE_HOURS,
  LATE_USAGE_DAYS,
  Organizations,
  type Organization,
  PAYMENT_TERMS_DAYS,
  settingsOf,
  wholeNumberIn
} from "../../src/organizations/Organizations.ts"
import { rateLimitsInForce, ROUTE_FAMILIES, type RateLimit, type RateLimitsChange, type RouteFamily } from "../../src/organizations/RateLimits.ts"
import { Details, Table } from "../ui/Table.tsx"
import { decodeInput, encode, organizationOf, run, withJson, withOrg } from "../run.ts"
import { ApiKeyJson, apiKeyJson } from "../../src/http/ApiKeysApi.ts"

const organizationJson = (organization: Organization) => {
  const settings = settingsOf(organization)
  return { ...settings, createdAt: settings.createdAt.toISOString(), updatedAt: settings.updatedAt.toISOString() }
}

/**
 * `--rate-limit-FAMILY PER_SECOND/BURST` (`100/200`: 100 tokens a second, buckets of 200) or `default`;
 * the numbers' bounds are the service's rule (Organizations.updateSettings).
 */
const rateLimitFlags = (options: Partial<Record<RouteFamily, string>>) =>
  Effect.gen(function*() {
    const change: { -readonly [F in RouteFamily]?: RateLimit | null } = {}
    for (const family of ROUTE_FAMILIES) {
      const value = options[family]?.trim()
      if (value === undefined) continue
      if (value === "default") {
        change[family] = null
        continue
      }
      const match = /^(\d+(?:\.\d+)?|\.\d+)\/(\d+)$/.exec(value)
      if (match === null) {
        return yield* new BadRequest({
          message: `--rate-limit-${family} must be PER_SECOND/BURST (such as 100/200) or default (got ${JSON.stringify(value)})`
        })
      }
      change[family] = { perSecond: Number(match[1]), burst: Number(match[2]) }
    }
    return Object.keys(change).length === 0 ? undefined : change as RateLimitsChange
  })

const rateLimitText = (limit: RateLimit & { readonly source: string }) =>
  `${limit.perSecond}/s, burst ${limit.burst}${limit.source === "DEFAULT" ? " (default)" : ""}`

/** A whole-number flag within `range`: "7" is 7; "7.5", "x" or out of range is a 400 naming the flag, nothing written. */
const wholeFlag = (flag: string, value: string | undefined, range: { readonly min: number; readonly max: number }) => {
  if (value === undefined) return Effect.succeed(undefined)
  const number = /^\s*[+-]?\d+\s*$/.test(value) ? Number(value) : Number.NaN
  const why = wholeNumberIn(flag, number, range)
  return why === undefined ? Effect.succeed(number) : Effect.fail(new BadRequest({ message: `${why} (got ${JSON.stringify(value)})` }))
}

/** `--billing-address LINE`, once a line, collected in order. */
const collectLine = (line: string, lines: Array<string> | undefined) => [...(lines ?? []), line]

/**
 * The billing contact flags as a change: `--billing-email ""` clears the
 * e-mail; `--billing-address LINE` (repeated, a line each) replaces the
 * address, and one `--billing-address ""` clears it. What the service would
 * refuse is a 400 naming the flag, nothing written.
 */
const billingContactFlags = (email: string | undefined, lines: ReadonlyArray<string> | undefined) => {
  const addressLines = lines === undefined ? undefined : lines.length === 1 && lines[0]!.trim() === "" ? [] : lines
  if (email === undefined && addressLines === undefined) return Effect.succeed(undefined)
  const change: BillingContactChange = {
    ...(email !== undefined ? { email } : {}),
    ...(addressLines !== undefined ? { addressLines } : {})
  }
  const why = billingContactProblem(change)
  return why === undefined
    ? Effect.succeed(change)
    : Effect.fail(new BadRequest({ message: `--billing-email/--billing-address: ${why}` }))
}

const contactText = (organization: Organization) => {
  const contact = billingContactOf(organization)
  const parts = [contact.email, ...contact.addressLines].filter((part): part is string => part !== null)
  return parts.length === 0 ? "(not set)" : parts.join(", ")
}

/** A key as `GET /api-keys` shows it (id, name, prefix, status, dates, createdBy): never the key itself. */
const keyJson = (key: ApiKey) => encode(ApiKeyJson)(apiKeyJson(key, new Date()))

const keyStatus = (key: ApiKey) => keyStatusAt(key, new Date()).toLowerCase()

const parseExpiry = (value: string | undefined) => {
  if (value === undefined) return Effect.succeed(undefined)
  const date = new Date(value)
  return Number.isNaN(date.getTime())
    ? Effect.fail(new BadRequest({ message: `--expires-at: not an ISO 8601 date: ${value}` }))
    : Effect.succeed(date)
}

export const registerOrg = (program: Command) => {
  const org = program.command("org").description("organisations (workspaces)")

  withJson(org.command("create").description("create an organisation and its first API key"))
    .requiredOption("--name <name>", "organisation name")
    .option("--currency <code>", "primary currency (default USD)")
    .action((options: { json?: boolean; name: string; currency?: string }) =>
      run(
        options,
        Effect.flatMap(Organizations, (organizations) =>
          organizations.create({ name: options.name, currencyCode: options.currency })),
        {
          json: ({ organization, apiKey }) => ({ organization: { id: organization.id, name: organization.name }, apiKey }),
          view: ({ organization, apiKey }) => (
            <Details
              title="Organisation created. The API key is shown once: keep it now."
              fields={[["id", organization.id], ["name", organization.name], ["apiKey", apiKey]]}
            />
          )
        }
      )
    )

  withJson(org.command("list").description("list organisations")).action((options: { json?: boolean }) =>
    run(options, Effect.flatMap(Organizations, (organizations) => organizations.list), {
      json: (organizations) => ({ organizations: organizations.map(organizationJson), nextCursor: null }),
      view: (organizations) => (
        <Table
          columns={[
            { header: "ID", value: (o) => o.id },
            { header: "NAME", value: (o) => o.name },
            { header: "CURRENCY", value: (o) => o.currencyCode }
          ]}
          rows={organizations}
        />
      )
    }))

  withOrg(org.command("settings").description("show or change workspace settings"))
    .option("--reserved-wallet <on|off>", "enable the Reserved Wallet")
    .option("--name <name>", "rename the organisation")
    .option("--payment-instructions <text>", "how customers pay an OPEN invoice, shown on its hosted page (\"\" clears)")
    .option(
      "--late-usage-days <n>",
      `how old a signal's timestamp may be, in days (${LATE_USAGE_DAYS.min} to ${LATE_USAGE_DAYS.max}, default ${LATE_USAGE_DAYS.default})`
    )
    .option(
      "--invoice-grace-hours <n>",
      `how long a cycle-end usage invoice stays DRAFT for late usage, in hours (${INVOICE_GRACE_HOURS.min} to ${INVOICE_GRACE_HOURS.max}, default ${INVOICE_GRACE_HOURS.default})`
    )
    .option("--invoice-number-prefix <text>", "what invoice numbers finalised from now on start with (default INV-; \"\" for none)")
    .option("--rate-limit-signals <rate/burst>", "API rate limit per key for signals and checks: PER_SECOND/BURST, or default (50000/100000)")
    .option("--rate-limit-reads <rate/burst>", "API rate limit per key for reads: PER_SECOND/BURST, or default (10000/20000)")
    .option("--rate-limit-writes <rate/burst>", "API rate limit per key for other changes: PER_SECOND/BURST, or default (5000/10000)")
    .option(
      "--payment-terms-days <n>",
      `days after an invoice becomes final that it is due, for customers without their own (${PAYMENT_TERMS_DAYS.min} to ${PAYMENT_TERMS_DAYS.max}, default ${PAYMENT_TERMS_DAYS.default})`
    )
    .option("--billing-email <email>", "the billing contact's e-mail address, shown to customers (\"\" clears)")
    .option(
      "--billing-address <line>",
      "a line of the billing contact's postal address; repeat for each line, in order (\"\" alone clears)",
      collectLine
    )
    .action((options: {
      json?: boolean
      org?: string
      invoiceNumberPrefix?: string
      reservedWallet?: string
      name?: string
      paymentInstructions?: string
      lateUsageDays?: string
      invoiceGraceHours?: string
      rateLimitSignals?: string
      rateLimitReads?: string
      rateLimitWrites?: string
      paymentTermsDays?: string
      billingEmail?: string
      billingAddress?: Array<string>
    }) =>
      run(
        options,
        Effect.gen(function*() {
          const id = yield* organizationOf(options)
          const organizations = yield* Organizations
          const reserved = options.reservedWallet === undefined ? undefined : ["on", "true", "yes"].includes(options.reservedWallet)
          const lateUsageDays = yield* wholeFlag("--late-usage-days", options.lateUsageDays, LATE_USAGE_DAYS)
          const invoiceGraceHours = yield* wholeFlag("--invoice-grace-hours", options.invoiceGraceHours, INVOICE_GRACE_HOURS)
          const paymentTermsDays = yield* wholeFlag("--payment-terms-days", options.paymentTermsDays, PAYMENT_TERMS_DAYS)
          const billingContact = yield* billingContactFlags(options.billingEmail, options.billingAddress)
          const rateLimits = yield* rateLimitFlags({
            signals: options.rateLimitSignals,
            reads: options.rateLimitReads,
            writes: options.rateLimitWrites
          })
          return yield* organizations.updateSettings(id, {
            reservedWalletEnabled: reserved,
            name: options.name,
            paymentInstructions: options.paymentInstructions,
            lateUsageDays,
            invoiceGraceHours,
            invoiceNumberPrefix: options.invoiceNumberPrefix,
            rateLimits,
            paymentTermsDays,
            billingContact
          })
        }),
        {
          json: (organization) => ({ organization: organizationJson(organization) }),
          view: (organization) => (
            <Details
              fields={[
                ["id", organization.id],
                ["name", organization.name],
                ["currency", organization.currencyCode],
                ["reserved wallet", organization.reservedWalletEnabled ? "on" : "off"],
                ["payment instructions", organization.paymentInstructions ?? "(not set)"],
                ["late-usage window", `${organization.lateUsageDays} day(s)`],
                ["invoice grace period", organization.invoiceGraceHours === 0 ? "none (usage invoices final at once)" : `${organization.invoiceGraceHours} hour(s)`],
                ["invoice numbers", `${organization.invoiceNumberPrefix}000001, ...`],
                ["payment terms", organization.paymentTermsDays === 0 ? "due when final (0 days)" : `${organization.paymentTermsDays} day(s)`],
                ["billing contact", contactText(organization)],
                ...ROUTE_FAMILIES.map((family) =>
                  [`rate limit ${family}`, rateLimitText(rateLimitsInForce(organization.rateLimits)[family])] as const
                )
              ]}
            />
          )
        }
      )
    )
}

export const registerKey = (program: Command) => {
  const key = program.command("key").description("API keys of an organisation")

  withOrg(key.command("create").description("create an API key (shown once)"))
    .option("--name <name>", "a label for the key", "default")
    .option("--expires-at <iso>", "expiry, ISO 8601")
    .action((options: { json?: boolean; org?: string; name: string; expiresAt?: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const name = yield* decodeInput(ApiKeyName, options.name, "--name")
          const expiresAt = yield* parseExpiry(options.expiresAt)
          return yield* Effect.flatMap(ApiKeys, (keys) => keys.issue(organizationId, { name, expiresAt }))
        }),
        {
          json: ({ apiKey, secret }) => ({ key: keyJson(apiKey), apiKey: secret }),
          view: ({ apiKey, secret }) => (
            <Details title="API key created. It is shown once: keep it now." fields={[["id", apiKey.id], ["apiKey", secret]]} />
          )
        }
      )
    )

  withOrg(key.command("list").description("list API keys (never the keys themselves)")).action(
    (options: { json?: boolean; org?: string }) =>
      run(
        options,
        Effect.flatMap(organizationOf(options), (id) => Effect.flatMap(ApiKeys, (keys) => keys.list(id))),
        {
          json: (keys) => ({ keys: keys.map(keyJson), nextCursor: null }),
          view: (keys) => (
            <Table
              columns={[
                { header: "ID", value: (k) => k.id },
                { header: "NAME", value: (k) => k.name },
                { header: "PREFIX", value: (k) => `${k.keyPrefix}…` },
                { header: "STATUS", value: keyStatus },
                { header: "EXPIRES", value: (k) => k.expiresAt?.toISOString() ?? "never" }
              ]}
              rows={keys}
            />
          )
        }
      )
  )

  withOrg(key.command("revoke").description("revoke an API key").argument("<keyId>")).action(
    (keyId: string, options: { json?: boolean; org?: string }) =>
      run(
        options,
        // Returns once every API process refuses the key (ApiKeys.revokeEverywhere).
        Effect.flatMap(organizationOf(options), (id) => Effect.flatMap(ApiKeys, (keys) => keys.revokeEverywhere(id, keyId))),
        {
          json: (apiKey) => ({ key: keyJson(apiKey) }),
          view: (apiKey) => <Text>Revoked {apiKey.id}.</Text>
        }
      )
  )
}
