#!/usr/bin/env bash
# The suite under load: a fresh clone of HEAD, `stress-ng --cpu 2` beside it,
# and the project's CI (`.ci/run`: npm ci, both databases, the type check) N
# times in a row in that clone. Prints each run's result and time, and exits
# non-zero when any run failed. Each run's output is kept in the clone's folder.
#
#   scripts/ci-under-load.sh [N]      (N defaults to 3)
#
# CI_UNDER_LOAD_CPUS sets stress-ng's worker count (default 2, one per core here);
# CI_UNDER_LOAD_KEEP=1 keeps the clone afterwards.
set -euo pipefail
runs="${1:-3}"
cpus="${CI_UNDER_LOAD_CPUS:-2}"
repo="$(cd "$(dirname "$0")/.." && pwd)"

if ! command -v stress-ng >/dev/null 2>&1; then
  "$repo/scripts/apt-install.sh" stress-ng
fi

dir="$(mktemp -d /tmp/ci-under-load.XXXXXX)"
git clone -q "$repo" "$dir/repo"
echo "== $(git -C "$dir/repo" log --oneline -1) in $dir/repo; stress-ng --cpu $cpus beside it; $runs run(s)"

stress-ng --cpu "$cpus" --timeout 24h >/dev/null 2>&1 &
stress=$!
cleanup() {
  kill "$stress" 2>/dev/null || true
  wait "$stress" 2>/dev/null || true
  if [ "${CI_UNDER_LOAD_KEEP:-0}" != 1 ] && [ "${failed:-1}" = 0 ]; then rm -rf "$dir"; fi
}
trap cleanup EXIT

failed=0
for n in $(seq 1 "$runs"); do
  log="$dir/run-$n.log"
  started=$(date +%s)
  if bash "$dir/repo/.ci/run" >"$log" 2>&1; then result=pass; else result=FAIL; failed=1; fi
  seconds=$(( $(date +%s) - started ))
  echo "run $n: $result in ${seconds} s (load $(cut -d' ' -f1-3 /proc/loadavg)), output in $log"
  [ "$result" = pass ] || grep -E "^ (FAIL|❯) | × " "$log" | head -20 || true
done
[ "$failed" = 0 ] && echo "== all $runs run(s) passed" || echo "== some run failed: outputs kept in $dir"
exit "$failed"
