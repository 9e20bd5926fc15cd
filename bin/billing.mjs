#!/usr/bin/env node
// The CLI is TypeScript run through tsx, so a fresh clone needs no build step.
// tsx is pointed at our tsconfig: it would otherwise look for one in the caller's folder.
import { fileURLToPath } from "node:url"
import { register } from "tsx/esm/api"

register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) })
await import("../cli/main.ts")
