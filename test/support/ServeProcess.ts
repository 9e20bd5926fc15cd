/**
 * `billing serve` as a process of its own, and requests to it as an
 * organisation: for the tests that need the real binary on a database of
 * their choosing (a formation, a restored cluster, PostgreSQL behind a proxy),
 * where `TestApp`'s in-process server cannot go.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { HANG_GUARD_MS } from "./Eventually.ts"

const root = fileURLToPath(new URL("../..", import.meta.url))
const bin = fileURLToPath(new URL("../../bin/billing.mjs", import.meta.url))

/**
 * Starts `billing serve --port 0 ...flags` in `env`; resolves on its
 * "Listening on" line with the process and its API's base URL (`.../api/v1`),
 * rejects with its output if it exits first or does not listen in time.
 */
export const spawnServe = (env: NodeJS.ProcessEnv, flags: ReadonlyArray<string> = []) =>
  new Promise<{ readonly child: ChildProcess; readonly baseUrl: string }>((resolve, reject) => {
    const child = spawn(process.execPath, [bin, "serve", "--port", "0", ...flags], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    const timer = setTimeout(() => reject(new Error(`serve did not start:\n${output}`)), HANG_GUARD_MS)
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const match = /Listening on (http:\/\/[\d.]+:\d+)/.exec(output)
      if (match !== null) {
        clearTimeout(timer)
        resolve({ child, baseUrl: `${match[1]}/api/v1` })
      }
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`serve exited with ${code}:\n${output}`))
    })
  })

export interface Answer {
  readonly status: number
  /** The JSON body; undefined when there was none. Tests read it field by field. */
  readonly body: any
  readonly headers: Headers
}

/** Requests to the API at `baseUrl` with `apiKey`: JSON in, the status, JSON body and headers out. */
export const apiCaller = (baseUrl: string, apiKey: string) => {
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> => {
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${apiKey}`, ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await response.text()
    return { status: response.status, body: text === "" ? undefined : JSON.parse(text), headers: response.headers }
  }
  /** The id of what a create call made; anything but 201 stops the test with the answer. */
  const created = async (path: string, body: unknown, field: string): Promise<string> => {
    const answer = await call("POST", path, body)
    if (answer.status !== 201) throw new Error(`${path}: ${answer.status} ${JSON.stringify(answer.body)}`)
    return answer.body.result[field].id
  }
  return { call, created }
}
