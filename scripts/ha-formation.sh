#!/usr/bin/env bash
# A highly available PostgreSQL on this machine: a pg_auto_failover formation
# (Debian's postgresql-15-auto-failover) of a monitor and two nodes with
# synchronous replication, data under a temporary folder, run as the postgres
# user. The failover test (test/failover.test.ts), the read-replica tests and
# docs/operations.md use it.
#
#   scripts/ha-formation.sh up        installs what is missing, starts the formation, waits for primary + secondary
#   scripts/ha-formation.sh uri       the multi-host DATABASE_URL (target_session_attrs=read-write)
#   scripts/ha-formation.sh state     the monitor's view (pg_autoctl show state)
#   scripts/ha-formation.sh primary   the port of the node that is primary now
#   scripts/ha-formation.sh standby   the port of the node that is secondary now
#   scripts/ha-formation.sh failover  the primary's machine lost: kill -9 of its pg_autoctl and postmaster;
#                                     waits until the other node takes writes
#   scripts/ha-formation.sh heal      restarts a killed node (it rejoins as the standby), waits for the pair
#   scripts/ha-formation.sh wait      wait until the formation has a primary and a secondary again
#   scripts/ha-formation.sh down      stops everything and removes the folder
#
# HA_DIR (default /tmp/billing-ha) holds the data; HA_PORT (default 6000) is the
# monitor's port, the nodes take the next two. HA_DATABASE (default billing) is
# the database the formation serves. HA_TIMEOUTS=short (CI's formation) makes
# the monitor declare a silent primary lost after 6 s instead of 20 and wait
# 10 s instead of 30 before promoting, with each keeper's own self-demotion cut
# to 5 s so that it still comes first (docs/operations.md, "Failover").
set -euo pipefail
dir="${HA_DIR:-/tmp/billing-ha}"
monitor_port="${HA_PORT:-6000}"
node_ports=("$((monitor_port + 1))" "$((monitor_port + 2))")
database="${HA_DATABASE:-billing}"
pg_bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
monitor_uri="postgres://autoctl_node@127.0.0.1:${monitor_port}/pg_auto_failover?sslmode=disable"

# pg_autoctl keeps its configuration and state under XDG folders keyed by the data folder: kept
# inside $dir, so that `down` leaves nothing behind and two formations never meet.
as_postgres() {
  runuser -u postgres -- env PATH="$pg_bin:$PATH" PG_CONFIG="$pg_bin/pg_config" HOME="$dir" \
    XDG_CONFIG_HOME="$dir/xdg/config" XDG_DATA_HOME="$dir/xdg/data" XDG_RUNTIME_DIR="$dir/xdg/run" "$@"
}
autoctl() { as_postgres pg_autoctl "$@"; }

install() {
  if ! command -v pg_autoctl >/dev/null 2>&1; then
    local version
    version="$(basename "$(dirname "$pg_bin")")"
    "$(dirname "$0")/apt-install.sh" "postgresql-${version}-auto-failover" pg-auto-failover-cli
  fi
}

# Starts `pg_autoctl run` for a data folder in the background, its output in <folder>.log.
run_keeper() {
  local pgdata="$1"
  as_postgres bash -c "nohup pg_autoctl run --pgdata '$pgdata' >'$pgdata.log' 2>&1 &"
}

# The monitor's view as "name port state" lines: the state a node reported, when the monitor
# also assigns it (a dead primary still shows the state it last reported, with another assigned).
states() {
  as_postgres psql -At -F ' ' -h 127.0.0.1 -p "$monitor_port" -d pg_auto_failover -U autoctl_node -c \
    "SELECT nodename, nodeport, CASE WHEN reportedstate = goalstate THEN reportedstate::text ELSE 'changing' END
       FROM pgautofailover.node ORDER BY nodeid" 2>/dev/null || true
}

port_in_state() { states | awk -v s="$1" '$3 == s { print $2; exit }'; }

# The node that takes writes: primary, or wait_primary (its standby is not back yet), or single.
primary_port() { states | awk '$3 == "primary" || $3 == "wait_primary" || $3 == "single" { print $2; exit }'; }

# Waits (up to $1 seconds) until one node reports primary and another secondary.
wait_healthy() {
  local limit="${1:-180}" started=$SECONDS
  until [ -n "$(port_in_state primary)" ] && [ -n "$(port_in_state secondary)" ]; do
    if (( SECONDS - started > limit )); then
      echo "the formation has no primary and secondary after ${limit} s:" >&2
      states >&2
      return 1
    fi
    sleep 1
  done
}

up() {
  install
  mkdir -p "$dir"
  chown postgres:postgres "$dir"
  if [ ! -f "$dir/monitor/PG_VERSION" ]; then
    autoctl create monitor --pgdata "$dir/monitor" --pgport "$monitor_port" --hostname 127.0.0.1 \
      --auth trust --no-ssl >"$dir/create-monitor.log" 2>&1
  fi
  pgrep -f "pg_autoctl run --pgdata $dir/monitor" >/dev/null || run_keeper "$dir/monitor"
  for _ in $(seq 1 60); do as_postgres pg_isready -q -h 127.0.0.1 -p "$monitor_port" && break; sleep 1; done
  [ "${HA_TIMEOUTS:-}" != short ] || short_monitor_timeouts
  local n=1
  for port in "${node_ports[@]}"; do
    if [ ! -f "$dir/node$n/PG_VERSION" ]; then
      # The second node is created once the first is primary: it clones it (pg_basebackup).
      [ "$n" = 1 ] || wait_for_primary 180
      autoctl create postgres --pgdata "$dir/node$n" --pgport "$port" --hostname 127.0.0.1 --name "node$n" \
        --monitor "$monitor_uri" --auth trust --no-ssl --dbname "$database" --pg-hba-lan \
        >"$dir/create-node$n.log" 2>&1
    fi
    [ "${HA_TIMEOUTS:-}" != short ] || autoctl config set --pgdata "$dir/node$n" timeout.network_partition_timeout "$short_partition_s" >/dev/null
    pgrep -f "pg_autoctl run --pgdata $dir/node$n" >/dev/null || run_keeper "$dir/node$n"
    n=$((n + 1))
  done
  wait_healthy 240
  echo "formation up: $(uri)"
}

# HA_TIMEOUTS=short. The keepers' network_partition_timeout stays below the monitor's
# primary_demote_timeout (derived from it, so the two cannot be edited apart): a primary cut off from
# the monitor and its standby stops taking writes before the standby can be promoted, as with the
# defaults (20 s below 30 s).
short_partition_s=5
short_demote_ms=$(( (short_partition_s + 5) * 1000 ))
short_monitor_timeouts() {
  as_postgres psql -q -h 127.0.0.1 -p "$monitor_port" -d pg_auto_failover -U postgres -v ON_ERROR_STOP=1 \
    -c "ALTER SYSTEM SET pgautofailover.health_check_period = 2000" \
    -c "ALTER SYSTEM SET pgautofailover.health_check_timeout = 2000" \
    -c "ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 1000" \
    -c "ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 6000" \
    -c "ALTER SYSTEM SET pgautofailover.primary_demote_timeout = $short_demote_ms" \
    -c "SELECT pg_reload_conf()" >/dev/null
}

wait_for_primary() {
  local limit="$1" started=$SECONDS
  until [ -n "$(port_in_state primary)" ] || [ -n "$(port_in_state single)" ] || [ -n "$(port_in_state wait_primary)" ]; do
    (( SECONDS - started > limit )) && { echo "no primary after ${limit} s" >&2; states >&2; return 1; }
    sleep 1
  done
}

uri() {
  echo "postgres://postgres@127.0.0.1:${node_ports[0]},127.0.0.1:${node_ports[1]}/${database}?target_session_attrs=read-write"
}

# The loss of the primary's machine: kill -9 of its pg_autoctl (the keeper, which would otherwise
# restart PostgreSQL within seconds, so that the monitor sees a restart and no failover) and then
# of its postmaster. Prints the seconds until the other node reported that it takes writes.
failover() {
  local old new started pid
  old="$(port_in_state primary)"
  [ -n "$old" ] || { echo "no primary to fail" >&2; states >&2; return 1; }
  local n=1
  for port in "${node_ports[@]}"; do [ "$port" = "$old" ] && break; n=$((n + 1)); done
  pid="$(head -1 "$dir/node$n/postmaster.pid")"
  local keeper
  keeper="$(pgrep -f "pg_autoctl run --pgdata $dir/node$n\$" || true)"
  # The keeper's own children (its supervisor and node loop) carry no data folder in their names.
  [ -z "$keeper" ] || kill -9 $keeper $(pgrep -P "$keeper" || true) 2>/dev/null || true
  started=$(date +%s.%N)
  kill -9 "$pid"
  until new="$(states | awk -v old="$old" '($3 == "primary" || $3 == "wait_primary") && $2 != old { print $2; exit }')" && [ -n "$new" ]; do
    sleep 0.2
  done
  echo "node on port $old killed at $started; port $new takes writes after $(echo "$(date +%s.%N) - $started" | bc) s"
}

# Brings back a node that was killed (its keeper rejoins it as the standby) and waits for a healthy pair.
heal() {
  local n=1
  for port in "${node_ports[@]}"; do
    pgrep -f "pg_autoctl run --pgdata $dir/node$n" >/dev/null || run_keeper "$dir/node$n"
    n=$((n + 1))
  done
  wait_healthy "${1:-240}"
}

down() {
  for pgdata in "$dir"/node* "$dir/monitor"; do
    [ -f "$pgdata/PG_VERSION" ] || continue
    autoctl stop --pgdata "$pgdata" --immediate >/dev/null 2>&1 || true
  done
  sleep 1
  pkill -9 -f "pg_autoctl .*--pgdata $dir" 2>/dev/null || true
  for pgdata in "$dir"/node* "$dir/monitor"; do
    [ -f "$pgdata/postmaster.pid" ] && kill -9 "$(head -1 "$pgdata/postmaster.pid")" 2>/dev/null || true
  done
  rm -rf "$dir"
}

case "${1:-}" in
  up) up ;;
  uri) uri ;;
  state) autoctl show state --pgdata "$dir/monitor" ;;
  primary) primary_port ;;
  standby) port_in_state secondary ;;
  failover) failover ;;
  wait) wait_healthy "${2:-180}" ;;
  heal) heal "${2:-240}" ;;
  down) down ;;
  *) sed -n '2,20p' "$0"; exit 2 ;;
esac
