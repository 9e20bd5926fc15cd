#!/usr/bin/env bash
# The whole test suite's HTTP traffic through Stoplight Prism's validation proxy:
# every answer the service gives a test must match the OpenAPI document.
#
#   scripts/contract-check.sh [vitest file filters...]
#
# Each test app starts its own Prism (test/support/Prism.ts); TestApp.request
# then goes through it and logs every exchange with the response violations
# Prism reports. Tests that send what the document forbids (invalid JSON, a
# method the path does not take) fail here, since Prism answers those itself:
# that is expected, and only response violations count. Exit code 1 when any
# answer departs from the document. Run it on both databases (DATABASE_URL set
# and unset); docs/api.md has the last figures.
set -uo pipefail
cd "$(dirname "$0")/.."
log="$(mktemp)"
BILLING_TEST_PRISM_LOG="$log" npx vitest run "$@" > "$log.vitest" 2>&1
node -e '
  const lines = require("node:fs").readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l))
  const bad = lines.filter((l) => l.violations.length > 0)
  const operations = new Set(lines.map((l) => `${l.method} ${l.path.split("?")[0].replace(/\/(cus|prc|cr|pl|inv|un|cmp|oc|tax|wh|sig|mem|pt|evt|whd|key|org)_[A-Za-z0-9]+/g, "/{id}")}`))
  console.log(`${lines.length} exchanges through Prism (${operations.size} distinct method and path shapes), ${bad.length} with response violations`)
  for (const l of bad.slice(0, 50)) console.log(JSON.stringify(l))
  process.exit(bad.length > 0 ? 1 : 0)
' "$log"
status=$?
rm -f "$log" "$log.vitest"
exit $status
