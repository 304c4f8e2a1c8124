#!/usr/bin/env bash
# The client's own cost of triage, record and postmortem against a real Prometheus
# (BENCHMARKS.md): the 100-replica fleet recording (10 minutes at 15 s, `gen_fixtures.py
# --fleet-bench 100`) backfilled with promtool, then each command measured by
# scripts/client_cost.py: its wall time against the same queries replayed one after another
# with curl (goal <= 1.25), its CPU against Prometheus' (goal <= 0.25). RUNS (default 7)
# each, then their medians (the store's CPU for the same queries moves by half run to run).
# Needs scripts/install-test-servers.sh. Leaves nothing running.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=$PWD/target/release/llm-doctor
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p target/bench
om=target/bench/fleet-100.om
[ -f "$om" ] || python3 scripts/gen_fixtures.py --fleet-bench 100 "$om"
promtool tsdb create-blocks-from openmetrics "$om" "$work/data" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'global:\n  scrape_interval: 1h\n  query_log_file: %s\n' "$work/queries.log" > "$work/p.yml"
prometheus --config.file="$work/p.yml" --storage.tsdb.path="$work/data" --storage.tsdb.retention.time=100y \
  --web.listen-address="127.0.0.1:$port" >"$work/log" 2>&1 &
pid=$!
until curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null; do sleep 0.1; done
url=http://127.0.0.1:$port
T0=1796083200
echo "# fleet-100 (100 replicas, 10 min at 15 s), Prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}'), build $(git rev-parse --short HEAD), $(date -u +%F)"
measure() { # label, command...: RUNS runs (default 7), one line each, then their medians
  local label=$1; shift
  python3 scripts/client_cost.py --url "$url" --store-pid "$pid" --log "$work/queries.log" \
    --repeat "${RUNS:-7}" -- "$@" | sed "s/^/$(printf '%-12s' "$label") /"
}
measure triage "$bin" diagnose --prometheus "$url" --at $((T0 + 607)) --format json
measure record "$bin" record --prometheus "$url" --from $((T0 + 7)) --to $((T0 + 607)) --step 15s --out "$work/r.om"
measure postmortem "$bin" postmortem --prometheus "$url" --from $((T0 + 307)) --to $((T0 + 607)) --step 15s --format json -q
