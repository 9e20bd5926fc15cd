/**
 * The origin of a link the CLI prints (`portal token`, `invoice pay-link`):
 * `--base-url`, `BILLING_PUBLIC_URL`, the running `billing serve`'s address,
 * `HOST`/`PORT` (src/links/PublicUrl.ts `cliOrigin`). When it is only the
 * default, no serve having been found, stderr says so: the link may point
 * nowhere, and the person knows how to fix it.
 */
import { Effect } from "effect"
import { BadRequest } from "../src/http/ApiErrors.ts"
import { cliOrigin, originOf } from "../src/links/PublicUrl.ts"
import { writeErr } from "./Output.ts"

export const linkOrigin = (baseUrl: string | undefined) =>
  Effect.gen(function*() {
    if (baseUrl !== undefined && originOf(baseUrl) === undefined) {
      return yield* new BadRequest({ message: `--base-url must be an http(s) URL such as https://billing.example.com, got ${baseUrl}` })
    }
    const { origin, source } = yield* cliOrigin(baseUrl)
    if (source === "DEFAULT") {
      writeErr(
        `note: no billing serve is running on this database on this machine: the link assumes ${origin}. ` +
          "Set BILLING_PUBLIC_URL (or pass --base-url) to the address your customers reach billing serve at.\n"
      )
    }
    return origin
  })
