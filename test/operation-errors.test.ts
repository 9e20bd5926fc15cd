/**
 * src/http/OperationErrors.ts, the service errors each operation's handler can
 * fail with (its `x-error-codes`, src/http/OperationCodes.ts), is what
 * scripts/operation-errors.ts reads from the handlers' types now: a handler or
 * a service that can fail with something new fails this test until the file is
 * written again (`npx tsx scripts/operation-errors.ts`). The compiler reads the
 * handlers in a process of its own (about half a minute).
 */
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const root = fileURLToPath(new URL("..", import.meta.url))

describe("each operation's service errors", () => {
  it("are the ones its handler's type says", async () => {
    const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        ["--import", "tsx", "scripts/operation-errors.ts", "--check"],
        { cwd: root, timeout: 240_000 },
        (_error, _stdout, stderr) => resolve({ code: child.exitCode, stderr })
      )
    })
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)
  }, 300_000)
})
