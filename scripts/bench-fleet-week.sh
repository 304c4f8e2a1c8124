#!/usr/bin/env bash
# Measures a top-down postmortem of a large fleet (BENCHMARKS.md): N vLLM replicas (with their
# dcgm-exporter and node_exporter series) over H hours at 60 s, three of them faulty for an hour
# each at 20, 50 and 75 % of the range with different causes (`gen_fixtures.py --fleet-bench N
# --incidents`), backfilled into a real Prometheus (promtool) and a real VictoriaMetrics
# (its import API). For each store, in the same run, scripts/client_cost.py measures
# `postmortem --prometheus URL --plan auto` (which must pick top-down): the client's wall time,
# CPU (user + sys) and peak memory, the store's CPU meanwhile (from /proc), and the same queries
# replayed one after another with curl: how long the store alone takes to answer them.
# Then the ratios the issue sets: whole run / replay (goal <= 1.25) and client CPU / store CPU
# (goal <= 0.25), and whether every fault was found with its onset within two coarse steps.
#
#   scripts/bench-fleet-week.sh [N] [HOURS]      # default 200 48; data kept in target/bench/
#
# Needs scripts/install-test-servers.sh. Leaves nothing running.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200}
H=${2:-48}
cargo build --release --quiet
bin=$PWD/target/release/llm-doctor
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p target/bench
T0=1796083200
base=target/bench/week-$N-${H}h
om=$base.om.gz
[ -f "$om" ] || python3 scripts/gen_fixtures.py --fleet-bench "$N" "$om" --hours "$H" --step 60 --incidents >&2

# Prometheus' blocks, made once.
if [ ! -d "$base.prom" ]; then
  echo "backfilling Prometheus ($(stat -c %s "$om") bytes gzip)" >&2
  zcat "$om" > "$work/f.om"
  /usr/bin/time -f "  promtool: %e s, %M KB" promtool tsdb create-blocks-from openmetrics "$work/f.om" "$base.prom.tmp" >/dev/null
  rm -f "$work/f.om"
  mv "$base.prom.tmp" "$base.prom"
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 600); do curl -sf "$1" >/dev/null && return 0; sleep 0.2; done; echo "not up: $1" >&2; return 1; }

pport=$(free_port)
printf 'global:\n  scrape_interval: 1m\n  query_log_file: %s\nscrape_configs: []\n' "$work/queries.log" > "$work/p.yml"
prometheus --config.file="$work/p.yml" --storage.tsdb.path="$base.prom" --storage.tsdb.retention.time=100y \
  --web.listen-address="127.0.0.1:$pport" --query.max-samples=200000000 >"$work/prom.log" 2>&1 &
pids+=($!); prom_pid=$!
wait_up "http://127.0.0.1:$pport/-/ready"

vport=$(free_port)
mkdir -p "$base.vm"
victoria-metrics -storageDataPath="$base.vm" -httpListenAddr="127.0.0.1:$vport" -retentionPeriod=100y \
  -search.disableCache -search.latencyOffset=0s -search.logSlowQueryDuration=1us >"$work/vm.log" 2>&1 &
pids+=($!); vm_pid=$!
wait_up "http://127.0.0.1:$vport/health"
if [ ! -f "$base.vm/.imported" ]; then
  echo "importing into VictoriaMetrics" >&2
  # OpenMetrics (seconds) as the text format with millisecond timestamps.
  zcat "$om" | sed -E '/^#/d; s/ ([0-9]+)$/ \1000/' |
    curl -sf -X POST -H "Content-Type: text/plain" -T - "http://127.0.0.1:$vport/api/v1/import/prometheus"   # streamed
  curl -sf "http://127.0.0.1:$vport/internal/force_flush" >/dev/null
  touch "$base.vm/.imported"
fi

from=$((T0 + 300)); to=$((T0 + H * 3600 - 60))
check() { # report -> what was found
  python3 - "$1" "$T0" "$N" "$H" <<'EOF'
import json, sys
report, t0, n, h = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
faulty = [max(1, n // 7), n // 2, max(2, n - 3)]
starts = [int(f * h * 3600) for f in (0.2, 0.5, 0.75)]
want = {f"gpu-node-{i + 1:03d}:8000": t0 + s for i, s in zip(faulty, starts)}
hits = {x["target"].rsplit("instance=")[-1]: x for x in report["fleet"]["hit"]}
found = [i for i in want if i in hits and abs(hits[i]["first_ms"] / 1000 - want[i]) <= 600]
extra = [i for i in hits if i not in want]
print(f"found {len(found)} of 3 faults with onset within two coarse steps; {len(extra)} healthy replicas reported; {report['notes'][0]}")
EOF
}

echo "# $N replicas x $H h at 60 s, build $(git rev-parse --short HEAD), $(date -u +%F)"
# Each store answers the postmortem (its report checked), then the same command measured and
# its queries replayed one after another with curl (scripts/client_cost.py): Prometheus' from
# its query log, VictoriaMetrics' from its log of every query (-search.logSlowQueryDuration=1us).
for store in prometheus victoria; do
  if [ $store = prometheus ]; then url=http://127.0.0.1:$pport; spid=$prom_pid; log=(--log "$work/queries.log")
  else url=http://127.0.0.1:$vport; spid=$vm_pid; log=(--vm-log "$work/vm.log"); fi
  cmd=("$bin" postmortem --prometheus "$url" --from "$from" --to "$to" --step 60s --format json -q)
  "${cmd[@]}" > "$work/$store.json" || true
  echo "$store: $(python3 scripts/client_cost.py --url "$url" --store-pid "$spid" "${log[@]}" -- "${cmd[@]}")"
  echo "  $(check "$work/$store.json")"
done
