/**
 * A fresh PGlite cluster, kept as a file, so that a new embedded database
 * starts from a copy instead of running initdb. initdb in WebAssembly is most
 * of a first start, in time and in CPU to a first answer (docs/benchmarks.md,
 * "Review figures").
 * The copy is PGlite's own dump of a cluster it has just created
 * with the options we open ours with (none), so it is byte for byte what
 * initdb would have written; nothing of ours is in it (migrations run after,
 * as on any database).
 *
 * It lives in `node_modules/.cache/billing/`, named by PGlite's version, and
 * is written by the build (`npm ci`, `npm test`: scripts/build.mjs). Without
 * it (sources run before any build), a new database runs initdb instead.
 */
import { PGlite } from "@electric-sql/pglite"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** The nearest `node_modules` above this module that holds PGlite (from src/db/ and from dist/ alike). */
const pgliteModules = (): string | undefined => {
  let dir = path.dirname(fileURLToPath(import.meta.url))
  for (;;) {
    if (fs.existsSync(path.join(dir, "node_modules", "@electric-sql", "pglite", "package.json"))) {
      return path.join(dir, "node_modules")
    }
    const parent = path.dirname(dir)
    if (parent === dir) return undefined
    dir = parent
  }
}

/** Where the template of the installed PGlite version is kept. */
export const templatePath = (): string | undefined => {
  const modules = pgliteModules()
  if (modules === undefined) return undefined
  const { version } = JSON.parse(fs.readFileSync(path.join(modules, "@electric-sql", "pglite", "package.json"), "utf8"))
  return path.join(modules, ".cache", "billing", `pglite-${version}-cluster.tar.gz`)
}

/** The template, when the build has written it. */
export const readTemplate = (): Blob | undefined => {
  const file = templatePath()
  if (file === undefined || !fs.existsSync(file)) return undefined
  return new Blob([fs.readFileSync(file)])
}

/** Whether `dataDir` holds no cluster yet (our own lock and socket files may be there already). */
export const holdsNoCluster = (dataDir: string): boolean => !fs.existsSync(path.join(dataDir, "PG_VERSION"))

/** Writes the template unless it is there; returns its path. Written whole or not at all. */
export const ensureTemplate = async (): Promise<string | undefined> => {
  const file = templatePath()
  if (file === undefined || fs.existsSync(file)) return file
  const db = new PGlite()
  try {
    await db.waitReady
    const dump = await db.dumpDataDir("gzip")
    fs.mkdirSync(path.dirname(file), { recursive: true })
    const partial = `${file}.${process.pid}.partial`
    fs.writeFileSync(partial, Buffer.from(await dump.arrayBuffer()))
    fs.renameSync(partial, file)
  } finally {
    await db.close()
  }
  return file
}
