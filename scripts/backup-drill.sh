#!/usr/bin/env bash
# Backups and a point-in-time restore with pgBackRest (Debian's `pgbackrest`),
# on this machine: a dedicated PostgreSQL cluster whose WAL is archived into a
# pgBackRest repository, full backups of it, named restore points, and a
# restore into a fresh cluster beside it. docs/operations.md ("Backups and
# restore") explains the stanza; test/restore-drill.test.ts runs the drill.
#
#   scripts/backup-drill.sh up                  installs pgbackrest if missing, creates the cluster and the stanza, checks it, prints DATABASE_URL
#   scripts/backup-drill.sh backup              a full backup (--type=full)
#   scripts/backup-drill.sh restore-point NAME  pg_create_restore_point(NAME), then pg_switch_wal() and waits until that WAL is archived
#   scripts/backup-drill.sh restore TARGET      restores the latest backup up to TARGET (a restore point's name, or a
#                                               timestamp such as '2025-01-31 12:00:00.123+00') into a fresh cluster,
#                                               promotes it, waits until it accepts writes, prints its DATABASE_URL
#   scripts/backup-drill.sh info                pgbackrest info: the backups and the archived WAL range
#   scripts/backup-drill.sh url                 the drill cluster's DATABASE_URL
#   scripts/backup-drill.sh down                stops both clusters and removes the folder
#
# BACKUP_DIR (default /tmp/billing-backup) holds everything: the cluster (data), the
# pgBackRest repository (repo), its configuration (pgbackrest.conf), logs and the
# restored cluster (restored). BACKUP_PORT (default 6201) is the cluster's port,
# BACKUP_RESTORE_PORT (default 6202) the restored one's. BACKUP_DATABASE (default
# billing) is the database created for the service.
set -euo pipefail
dir="${BACKUP_DIR:-/tmp/billing-backup}"
port="${BACKUP_PORT:-6201}"
restore_port="${BACKUP_RESTORE_PORT:-6202}"
database="${BACKUP_DATABASE:-billing}"
stanza=billing
pg_bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
conf="$dir/pgbackrest.conf"
data="$dir/data"
restored="$dir/restored"
socket="$dir/run"

as_postgres() { runuser -u postgres -- env PATH="$pg_bin:$PATH" HOME="$dir" "$@"; }
backrest() { as_postgres pgbackrest --config="$conf" --stanza="$stanza" "$@"; }
# psql on the drill cluster (or, with PSQL_PORT, the restored one), over its own socket.
sql() { as_postgres psql -X -v ON_ERROR_STOP=1 -At -h "$socket" -p "${PSQL_PORT:-$port}" -d "$database" -c "$1"; }

install() {
  if ! command -v pgbackrest >/dev/null 2>&1; then
    "$(dirname "$0")/apt-install.sh" pgbackrest
  fi
}

port_in_use() { as_postgres pg_isready -q -h 127.0.0.1 -p "$1" >/dev/null 2>&1; }

url() { echo "postgres://postgres@127.0.0.1:$1/${database}"; }

up() {
  install
  if [ -f "$data/PG_VERSION" ]; then
    # Already created: start it if it is down, so `up` can be run twice.
    [ -f "$data/postmaster.pid" ] || as_postgres pg_ctl -D "$data" -l "$dir/log/postgresql.log" -w start >/dev/null
    url "$port"
    return
  fi
  if port_in_use "$port"; then
    echo "port $port already has a PostgreSQL: set BACKUP_PORT to another" >&2
    return 1
  fi
  mkdir -p "$dir/repo" "$dir/log" "$dir/lock" "$socket"
  chown -R postgres:postgres "$dir"
  chmod 700 "$dir/repo"

  # The stanza: one repository (repo1) in the folder, keeping two full backups
  # and the WAL they need; the cluster it backs up (pg1) found by its data
  # folder, port and socket. Every pgbackrest call names this file.
  cat >"$conf" <<EOF
[global]
repo1-path=$dir/repo
repo1-retention-full=2
log-path=$dir/log
lock-path=$dir/lock
log-level-console=warn
log-level-file=info
start-fast=y
compress-type=lz4

[$stanza]
pg1-path=$data
pg1-port=$port
pg1-socket-path=$socket
EOF
  chown postgres:postgres "$conf"

  as_postgres initdb -D "$data" -U postgres --auth-local=trust --auth-host=trust -E UTF8 --locale=C.UTF-8 \
    >"$dir/log/initdb.log"
  # WAL archiving: every finished WAL segment is pushed into the repository; a
  # segment is not recycled until archive-push has succeeded.
  cat >>"$data/postgresql.conf" <<EOF

# backup drill (scripts/backup-drill.sh)
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$socket'
wal_level = replica
archive_mode = on
archive_command = 'pgbackrest --config=$conf --stanza=$stanza archive-push %p'
max_wal_senders = 3
EOF
  as_postgres pg_ctl -D "$data" -l "$dir/log/postgresql.log" -w start >/dev/null
  as_postgres createdb -h "$socket" -p "$port" "$database"
  backrest stanza-create
  # check: the configuration is valid and a WAL switch reaches the repository.
  backrest check
  url "$port"
}

backup() {
  backrest --type=full backup
  backrest info --output=text | sed -n '/full backup/,$p' | tail -4
}

restore_point() {
  local name="$1" segment
  # The named point, then a switch to a new WAL segment: the one holding the
  # point is finished, so it is archived now instead of when it fills up.
  segment="$(sql "SELECT pg_walfile_name(pg_create_restore_point('${name//\'/\'\'}'))")"
  sql "SELECT pg_switch_wal()" >/dev/null
  local started=$SECONDS
  until [ "$(sql "SELECT coalesce(last_archived_wal >= '$segment', false) FROM pg_stat_archiver")" = t ]; do
    if (( SECONDS - started > 60 )); then
      echo "WAL segment $segment not archived after 60 s:" >&2
      sql "SELECT * FROM pg_stat_archiver" >&2
      return 1
    fi
    sleep 0.2
  done
  echo "restore point $name in WAL segment $segment, archived"
}

stop_cluster() {
  [ -f "$1/postmaster.pid" ] || return 0
  as_postgres pg_ctl -D "$1" -m fast -w stop >/dev/null 2>&1 ||
    kill -9 "$(head -1 "$1/postmaster.pid")" 2>/dev/null || true
}

restore() {
  local target="$1" type=name
  # A target that starts with a date is a moment; anything else names a restore point.
  [[ "$target" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2} ]] && type=time
  if port_in_use "$restore_port" && [ ! -f "$restored/postmaster.pid" ]; then
    echo "port $restore_port already has a PostgreSQL: set BACKUP_RESTORE_PORT to another" >&2
    return 1
  fi
  stop_cluster "$restored"
  rm -rf "$restored"
  mkdir -p "$restored"
  chown postgres:postgres "$restored"
  chmod 700 "$restored"
  # The latest backup, then the archived WAL replayed up to the target; there
  # the cluster is promoted (a new timeline) and takes writes. Its archiving is
  # off: the drill's copy must not push a second history into the stanza the
  # original cluster still archives to.
  backrest --pg1-path="$restored" --type="$type" --target="$target" --target-action=promote \
    --archive-mode=off restore
  cat >>"$restored/postgresql.auto.conf" <<EOF
port = $restore_port
EOF
  as_postgres pg_ctl -D "$restored" -l "$dir/log/restored.log" -w -t 120 start >/dev/null
  local started=$SECONDS
  until [ "$(PSQL_PORT=$restore_port sql "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'" 2>/dev/null)" = t ]; do
    if (( SECONDS - started > 120 )); then
      echo "the restored cluster does not accept writes after 120 s:" >&2
      tail -20 "$dir/log/restored.log" >&2
      return 1
    fi
    sleep 0.2
  done
  url "$restore_port"
}

down() {
  stop_cluster "$restored"
  stop_cluster "$data"
  rm -rf "$dir"
}

case "${1:-}" in
  up) up ;;
  backup) backup ;;
  restore-point) [ -n "${2:-}" ] || { echo "usage: $0 restore-point NAME" >&2; exit 2; }; restore_point "$2" ;;
  restore) [ -n "${2:-}" ] || { echo "usage: $0 restore NAME|TIMESTAMP" >&2; exit 2; }; restore "$2" ;;
  info) backrest info ;;
  url) url "$port" ;;
  down) down ;;
  *) sed -n '2,22p' "$0"; exit 2 ;;
esac
