/**
 * Test files share a worker process (vitest.config.ts, `isolate: false`), so a
 * file that sets `process.env` (a webhook retry schedule, a public URL) must
 * not hand it to the next file: each file ends with the environment it began
 * with, as if it had had a process of its own.
 */
import { afterAll } from "vitest"

const atStart = { ...process.env }

afterAll(() => {
  for (const name of Object.keys(process.env)) {
    if (!(name in atStart)) delete process.env[name]
  }
  Object.assign(process.env, atStart)
})
