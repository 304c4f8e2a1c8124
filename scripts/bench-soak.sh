#!/usr/bin/env bash
# Soak (and load) benchmark of `llm-doctor serve` (BENCHMARKS.md, "Soak"): a real Prometheus
# holding a backfilled 50-replica vLLM fleet, serve in front of a webhook sink that is down
# 10 s of every 60 s, and 100 firing alerts a second over the 50 replicas for 10 minutes.
# Prints latency per POST, 503s, serve's RSS after warm-up and at the end, and what the sink
# received (each alert once). Settings by environment (scripts/soak.py): RATE, DURATION (s),
# TARGETS (at most 50), FLAP_PERIOD/FLAP_DOWN (FLAP_DOWN=0: never down), RETRY_DEADLINE,
# ACK (receiver.ack: after_delivery, the default, or on_receipt),
# LLM_DOCTOR_BIN (default target/release/llm-doctor: `cargo build --release` first).
# Needs scripts/install-test-servers.sh. Leaves nothing running.
set -euo pipefail
cd "$(dirname "$0")/.."
export LLM_DOCTOR_BIN=${LLM_DOCTOR_BIN:-target/release/llm-doctor}
[ -x "$LLM_DOCTOR_BIN" ] || { echo "no $LLM_DOCTOR_BIN: cargo build --release first" >&2; exit 2; }
fleet=target/bench/fleet-50-20m.om.gz
[ -f "$fleet" ] || { mkdir -p target/bench; python3 scripts/gen_fixtures.py --fleet-bench 50 "$fleet" --hours 0.3334 --step 30 >/dev/null; }
work=$(mktemp -d)
export WORK=$work
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

zcat "$fleet" > "$work/fleet.om"
promtool tsdb create-blocks-from openmetrics "$work/fleet.om" "$work/data" >/dev/null
rm "$work/fleet.om"
printf 'global:\n  scrape_interval: 1h\n' > "$work/p.yml"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
prometheus --config.file="$work/p.yml" --storage.tsdb.path="$work/data" --storage.tsdb.retention.time=100y \
  --web.listen-address=127.0.0.1:$port >"$work/prometheus.log" 2>&1 &
pid=$!
until curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null; do sleep 0.1; done
# The fleet recording: 20 minutes from 2026-12-01T00:00:00Z at a 30 s step.
PROM_URL=http://127.0.0.1:$port DATA_START=1796083200 DATA_END=1796084400 python3 scripts/soak.py
