#!/usr/bin/env bash
# Measures live triage against a local Prometheus (BENCHMARKS.md): a single replica and a
# 100-replica fleet, each backfilled with promtool, queried by the release binary.
# Needs scripts/install-test-servers.sh and python3 with PyYAML. Leaves nothing running.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

run() { # name, recording, at
  local name=$1 om=$2 at=$3 port
  rm -rf "$work/data" "$work/queries.log"
  /usr/bin/time -f "  promtool backfill of $name: %e s" promtool tsdb create-blocks-from openmetrics "$om" "$work/data" >/dev/null
  # The query log says which queries the triage sent (its discovery queries are timed alone below).
  printf 'global:\n  scrape_interval: 1h\n  query_log_file: %s\n' "$work/queries.log" > "$work/p.yml"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  prometheus --config.file="$work/p.yml" --storage.tsdb.path="$work/data" --storage.tsdb.retention.time=100y \
    --web.listen-address=127.0.0.1:$port >"$work/log" 2>&1 &
  pid=$!
  until curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null; do sleep 0.1; done
  ./target/release/llm-doctor diagnose --prometheus "http://127.0.0.1:$port" --at "$at" --format json >/dev/null 2>&1 || true
  for i in 1 2 3 4 5; do
    ./target/release/llm-doctor diagnose --prometheus "http://127.0.0.1:$port" --at "$at" --format json 2>&1 >/dev/null | grep '^queried' | sed "s/^/  $name run $i: /" || true
    # BASELINE=path/to/another/llm-doctor: the same triage by that binary, alternating.
    if [ -n "${BASELINE:-}" ]; then
      "$BASELINE" diagnose --prometheus "http://127.0.0.1:$port" --at "$at" --format json 2>&1 >/dev/null | grep '^queried' | sed "s/^/  $name baseline run $i: /" || true
    fi
  done
  # Each discovery query of the triage (`count by`: one an adapter, and the versions') alone,
  # three times each, as the triage sent it (taken from Prometheus' query log).
  python3 -c 'import json,sys
seen=[]
for line in open(sys.argv[1]):
    q=json.loads(line)["params"]["query"]
    if q.startswith("count by") and q not in seen: seen.append(q)
print("\0".join(seen), end="")' "$work/queries.log" > "$work/discovery"
  while IFS= read -r -d '' q || [ -n "$q" ]; do
    names=${q#*__name__=~\"}  # the metrics it counts, which say whose it is
    for i in 1 2 3; do
      curl -s -o /dev/null -w "  $name discovery alone: %{time_total} s  ${names:0:50}...\n" \
        --data-urlencode "query=$q" --data-urlencode "time=$at" "http://127.0.0.1:$port/api/v1/query"
    done
  done < "$work/discovery"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
}

python3 -c "import gzip,sys; sys.stdout.write(gzip.decompress(open('fixtures/kv_cache_exhaustion.om.gz','rb').read()).decode())" > "$work/one.om"
run single-replica "$work/one.om" 1796083807
[ -f target/bench/fleet-100.om ] || { mkdir -p target/bench; python3 scripts/gen_fixtures.py --fleet-bench 100 target/bench/fleet-100.om; }
run fleet-100 target/bench/fleet-100.om 1796083807
