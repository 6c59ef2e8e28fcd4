#!/usr/bin/env bash
# Runs execstore and its peers through the same workloads and writes
# results/RESULTS.md with its charts.
#
#   bench/run.sh quick [flags]   seconds per contender, no PostgreSQL (what CI runs);
#                                writes results/quick/ (not committed)
#   bench/run.sh full [flags]    every contender; installs Debian's PostgreSQL if it is
#                                missing, runs a throwaway cluster on 127.0.0.1 for the
#                                River rows and stops it at the end; writes results/
#
# Flags go to the Go program (go run ./cmd/execbench -h lists them); e.g.
# `bench/run.sh quick -workloads b -claim-mode one` runs only claim + complete and
# the scale curve, and only with claimers that complete the batch they ran and
# claim the next in one call (-claim-mode two: claim, then complete; default both);
# `-pending 100000,1000000` runs (b) and (e) at those pending sizes only.
# With BENCH_WAIT_QUIET=1 a full run first waits, up to 30 minutes, until the
# 1-minute load average is below 1.0, so that a shared machine is quiet.
set -euo pipefail
cd "$(dirname "$0")"

mode=${1:-quick}
shift || true

case "$mode" in
quick)
  exec go run ./cmd/execbench -quick "$@"
  ;;
full) ;;
*)
  echo "usage: $0 quick|full [flags]" >&2
  exit 2
  ;;
esac

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
PGBIN=$(pg_bin)
if [ -z "$PGBIN" ]; then
  echo "== installing PostgreSQL (Debian's postgresql package)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  PGBIN=$(pg_bin)
fi

# The cluster belongs to an unprivileged user: PostgreSQL refuses to run as root.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  local p
  for p in $(shuf -i 20000-60000 -n 50); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  echo "no free port found" >&2
  return 1
}

PGTMP=$(mktemp -d /tmp/execbench-pg.XXXXXX)
cleanup() {
  as_pg "$PGBIN/pg_ctl" -D "$PGTMP/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$PGTMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM # exit, so that the EXIT trap stops the cluster and nothing runs on
if [ "$(id -u)" = 0 ]; then chown postgres "$PGTMP"; fi

PORT=$(free_port)
echo "== PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}') in $PGTMP on 127.0.0.1:$PORT"
as_pg "$PGBIN/initdb" -D "$PGTMP/data" -A trust -U bench --no-sync >/dev/null
# Durable like every other row (fsync=on, synchronous_commit=on, full_page_writes=on);
# otherwise sized for this machine so that River runs at its best: buffers that hold
# the benchmark's tables, checkpoints that do not fall inside a measurement.
as_pg "$PGBIN/pg_ctl" -D "$PGTMP/data" -l "$PGTMP/postgres.log" -w start -o "\
 -c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$PGTMP \
 -c fsync=on -c synchronous_commit=on -c full_page_writes=on \
 -c max_connections=200 -c shared_buffers=1GB -c wal_buffers=64MB \
 -c max_wal_size=8GB -c checkpoint_timeout=30min" >/dev/null

# Build first, so that compiling is not part of the load the run starts in.
go build -o "$PGTMP/execbench" ./cmd/execbench

if [ "${BENCH_WAIT_QUIET:-}" = 1 ]; then
  for i in $(seq 1 31); do
    load=$(cut -d' ' -f1 /proc/loadavg)
    if awk "BEGIN{exit !($load < 1.0)}"; then break; fi
    if [ "$i" = 31 ]; then echo "== load average still $load after 30 minutes; running anyway"; break; fi
    echo "== load average $load: waiting for it to fall below 1.0 ($i/30)"
    sleep 60 & wait $! # a signal ends the wait at once (and runs the trap)
  done
fi

BENCH_COMMAND="bench/run.sh full $*" "$PGTMP/execbench" -pg "postgres://bench@127.0.0.1:$PORT/postgres?sslmode=disable" "$@"
