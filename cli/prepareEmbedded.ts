/**
 * Writes the embedded database's cluster template (src/db/EmbeddedTemplate.ts)
 * when it is not there yet; run by the build.
 */
import { ensureTemplate } from "../src/db/EmbeddedTemplate.ts"

const file = await ensureTemplate()
process.stdout.write(`${file ?? "no PGlite found: no template"}\n`)
