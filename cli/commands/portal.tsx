import type { Command } from "commander"
import { Effect } from "effect"
import { PortalToken } from "../../src/portal/PortalApi.ts"
import { Portal } from "../../src/portal/Portal.ts"
import { linkOrigin } from "../linkOrigin.ts"
import { Box, Text } from "../ui/ink.ts"
import { UrlLine } from "../ui/Url.tsx"
import { encode, organizationOf, runnerOn, withOrg } from "../run.ts"
import { BillingCommandServices } from "../commandServices.ts"
import { CustomerId } from "../../src/ids.ts"

const run = runnerOn(BillingCommandServices)

export const registerPortal = (program: Command) => {
  const portal = program.command("portal").description("customer portal access")

  withOrg(portal.command("token").description("mint a short-lived portal token for a customer and print the portal URL").argument("<customerId>"))
    .option("--base-url <url>", "the origin of the link (default: $BILLING_PUBLIC_URL, else the running billing serve's address)")
    .action((customerId: string, options: { json?: boolean; org?: string; baseUrl?: string }) =>
      run(
        options,
        Effect.flatMap(organizationOf(options), (organizationId) =>
          Effect.flatMap(Portal, (portal) =>
            Effect.flatMap(linkOrigin(options.baseUrl), (origin) => portal.mint(organizationId, { customerId: CustomerId.make(customerId) }, origin)))),
        {
          json: encode(PortalToken),
          view: (token) => (
            <Box flexDirection="column">
              <Text bold>Portal link for {token.customerId} (open it in a browser while billing serve runs)</Text>
              <UrlLine label="url    " url={token.url} />
              <UrlLine label="expires" url={token.expiresAt.toISOString()} />
            </Box>
          )
        }
      )
    )
}
