#!/usr/bin/env node
// The `billing` bin. It runs the compiled CLI in dist/ (built by `npm ci` and
// `npm test`, see scripts/build.mjs), which starts in a fraction of the time
// tsx needs. When a TypeScript source is newer than that build (an edit not
// built yet) or there is no build, it runs the sources through tsx instead, so
// what runs is always what is in the tree.
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))

const newestSource = (dir) => {
  let newest = 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path))
    else if (/\.tsx?$/.test(entry.name)) newest = Math.max(newest, fs.statSync(path).mtimeMs)
  }
  return newest
}

const builtAt = () => {
  try {
    return fs.statSync(`${root}dist/BUILD`).mtimeMs
  } catch {
    return -1
  }
}

const built = builtAt()
if (built >= 0 && ["src", "cli", "worker"].every((dir) => newestSource(`${root}${dir}`) <= built)) {
  await import("../dist/cli/main.js")
} else {
  const { register } = await import("tsx/esm/api")
  // tsx is pointed at our tsconfig: it would otherwise look for one in the caller's folder.
  register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) })
  await import("../cli/main.ts")
}
