/**
 * Writes the typed client's generated sources (client/src/generated/) from the
 * API's definition, the document `GET /api/v1/openapi.json` serves. Run it after
 * changing the API:
 *
 *   npx tsx scripts/generate-client.ts
 *
 * test/typed-client.test.ts fails while the files differ from what the served
 * document generates.
 */
import * as OpenApi from "@effect/platform/OpenApi"
import { mkdirSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { Api } from "../src/app/Api.ts"
import { generateClientSources } from "./client-codegen.ts"

const directory = fileURLToPath(new URL("../client/src/generated/", import.meta.url))
mkdirSync(directory, { recursive: true })
const sources = await generateClientSources(OpenApi.fromApi(Api))
for (const [name, text] of Object.entries(sources)) writeFileSync(`${directory}${name}`, text)
process.stdout.write(`wrote ${Object.keys(sources).map((name) => `client/src/generated/${name}`).join(", ")}\n`)
