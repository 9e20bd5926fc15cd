/**
 * Stoplight Prism's validation proxy (`prism proxy`) in front of a test server:
 * every answer it forwards carries an `sl-violations` header listing where the
 * request or the response departs from the OpenAPI document.
 *
 * Used by `test/openapi-prism.test.ts` (a valid and an invalid request per
 * operation) and, when `BILLING_TEST_PRISM_LOG` names a file, by every
 * `TestApp.request` of the whole suite (see docs/api.md).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { HANG_GUARD_MS } from "./Eventually.ts"

const prismCli = fileURLToPath(new URL("../../node_modules/@stoplight/prism-cli/dist/index.js", import.meta.url))

export interface Violation {
  readonly location: ReadonlyArray<string>
  readonly message: string
  readonly severity: string
}

export interface PrismProxy {
  /** The proxy's origin: send `${url}/api/v1/...` where the server takes `/api/v1/...`. */
  readonly url: string
  readonly stop: () => void
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0))
    })
  })

/** Starts Prism on a free port, proxying to `upstream` (the server's origin) and checking against `document`. */
export const startPrism = async (upstream: string, document: unknown): Promise<PrismProxy> => {
  const directory = mkdtempSync(join(tmpdir(), "billing-prism-"))
  const documentPath = join(directory, "openapi.json")
  writeFileSync(documentPath, JSON.stringify(document))
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  let output = ""
  const prism: ChildProcess = spawn(process.execPath, [prismCli, "proxy", documentPath, upstream, "-p", String(port), "-v", "warn"], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  prism.stdout?.on("data", (chunk) => (output += chunk))
  prism.stderr?.on("data", (chunk) => (output += chunk))
  const stop = () => {
    prism.kill()
    rmSync(directory, { recursive: true, force: true })
  }
  for (const giveUpAt = Date.now() + HANG_GUARD_MS; Date.now() < giveUpAt;) {
    if (prism.exitCode !== null) {
      stop()
      throw new Error(`prism exited: ${output}`)
    }
    try {
      await fetch(`${url}/__ready`)
      return { url, stop }
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  stop()
  throw new Error(`prism did not start: ${output}`)
}

/** What Prism found wrong with one exchange. */
export const violationsOf = (response: Response): ReadonlyArray<Violation> => {
  const header = response.headers.get("sl-violations")
  return header ? JSON.parse(header) : []
}
