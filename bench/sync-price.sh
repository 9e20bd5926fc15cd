#!/usr/bin/env bash
# The price of synchronous replication, measured the way users meet it: bench/outside.ts
# (single-signal intake over HTTP, then the drain by one `billing worker`) twice on the
# formation's primary (scripts/ha-formation.sh): once as the formation runs it (a commit waits
# for the standby: synchronous_commit=on with a synchronous standby), once with
# synchronous_commit=local for the service's sessions (a commit waits for the primary's disk
# only; the WAL still streams to the standby). Same servers, same data folders, same run; each
# pass has its own yardstick (plain single-row INSERTs, which wait for the standby too).
#
#   scripts/ha-formation.sh up && bench/sync-price.sh [--backlog 20000]
#
# Prints each pass's rates and CPU a signal (every PostgreSQL process of the formation, serve, the
# worker) as JSON; docs/benchmarks.md "The price of synchronous replication".
set -euo pipefail
cd "$(dirname "$0")/.."
primary="$(scripts/ha-formation.sh primary)"
[ -n "$primary" ] || { echo "no formation: scripts/ha-formation.sh up" >&2; exit 2; }
url="postgres://postgres@127.0.0.1:${primary}/postgres"
echo "== formation primary on port $primary; synchronous_standby_names: $(psql -Atq "$url" -c 'SHOW synchronous_standby_names')"
for mode in on local; do
  options="-c synchronous_commit=$mode"
  echo "== synchronous_commit=$mode"
  DATABASE_URL="$url" npx tsx bench/outside.ts --phases drain --yardstick 20000 "$@" \
    --server-pg-options "$options" --worker-pg-options "$options" --report "/tmp/sync-price-$mode.json" >/dev/null
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))
    const d = r.drain ?? {}
    console.log(JSON.stringify({ yardstick: r.yardstick.rate, intake: d.intakeRate, intakeOfYardstick: +(d.intakeRate / r.yardstick.rate).toFixed(2),
      intakeCpuMsPerSignal: d.intakeCpuMsPerSignal, drain: d.rate, drainOfYardstick: d.ofYardstick, drainCpuMsPerSignal: d.drainCpuMsPerSignal }))
  ' "/tmp/sync-price-$mode.json"
done
