import { PGlite } from "@electric-sql/pglite"
import * as fs from "node:fs"
const mode = process.argv[2]
if (mode === "dump") {
  const t0 = performance.now()
  const db = new PGlite()   // in memory
  await db.waitReady
  const blob = await db.dumpDataDir("gzip")
  fs.writeFileSync("/tmp/tmpl.tar.gz", Buffer.from(await blob.arrayBuffer()))
  console.log("dumped", blob.size, ((performance.now() - t0) / 1000).toFixed(2))
  await db.close()
} else {
  const t0 = performance.now(); const c0 = process.cpuUsage()
  const blob = new Blob([fs.readFileSync("/tmp/tmpl.tar.gz")])
  const db = new PGlite(process.argv[3], { loadDataDir: blob })
  await db.waitReady
  const c1 = process.cpuUsage(c0)
  console.log("open from template", ((performance.now() - t0) / 1000).toFixed(2), "s wall", ((c1.user + c1.system) / 1e6).toFixed(2), "cpu")
  await db.query("create table if not exists t (x int)"); await db.query("insert into t values (1)")
  console.log((await db.query("select count(*) from t")).rows)
  await db.close()
}
