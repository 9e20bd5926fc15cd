/**
 * Test files share a worker process (vitest.config.ts, `isolate: false`), and
 * @effect/vitest's `layer(...)` assigns its own `effect`, `scoped`, `layer`,
 * `prop` and `flakyTest` onto vitest's one `it` object, for good. A file that
 * ran after test/shard-readiness.test.ts (which uses `layer` without test
 * services) got an `it.effect` with the live Clock and that file's closed
 * runtime: test/clock.test.ts failed with "testClock.setTime is not a function"
 * whenever the two shared a process. Each file starts with @effect/vitest's own
 * methods put back.
 */
import { effect, flakyTest, it, layer, live, prop, scoped, scopedLive } from "@effect/vitest"

Object.assign(it, { effect, scoped, live, scopedLive, flakyTest, layer, prop })
