#!/usr/bin/env bash
# Measures `postmortem` (BENCHMARKS.md): over recordings of a 64-replica fleet (engine,
# dcgm-exporter and node_exporter series at 15 s) of 1, 6 and 24 hours, beside `diagnose` of the
# same file in the same run; then `postmortem --prometheus` over a day of a real Prometheus
# (4 replicas backfilled with promtool) against the slowest range query it sends, and each
# query alone. Needs scripts/install-test-servers.sh. Leaves nothing running. With `ab`, compares
# this build's postmortem CPU with $BASELINE's instead (below).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=./target/release/llm-doctor
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p target/bench
T0=1796083200

fleet() { # replicas, hours -> path (gzip, streamed by the generator)
  local path="target/bench/fleet-$1-${2}h.om.gz"
  [ -f "$path" ] || python3 scripts/gen_fixtures.py --fleet-bench "$1" "$path" --hours "$2" >&2
  echo "$path"
}

measure() { # label, command...
  local label=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$work/t" "$@" >/dev/null 2>&1 || true
  read -r wall user sys rss < <(tail -n 1 "$work/t")
  printf '  %-34s wall %6.2f s  cpu %6.2f s  peak %5.0f MB\n' "$label" "$wall" "$(echo "$user + $sys" | bc)" "$(echo "$rss / 1024" | bc)"
}

# `BASELINE=<binary> scripts/bench-postmortem.sh ab [ROUNDS] [SCRAPE]`: this build against
# another, the 4 x 24 h postmortem alternating (SCRAPE 15, the default), or 4 x 2 h scraped
# every second (SCRAPE 1: 300 samples in each 5-minute window), CPU (user + system) min /
# median / max, outputs compared.
if [ "${1:-}" = ab ]; then
  if [ "${3:-15}" = 1 ]; then
    f=target/bench/fleet-4-2h-1s.om.gz
    [ -f "$f" ] || python3 scripts/gen_fixtures.py --fleet-bench 4 "$f" --hours 2 --step 1 >&2
  else
    f=$(fleet 4 24)
  fi
  for i in $(seq "${2:-10}"); do
    for x in base new; do
      b=$bin; [ $x = base ] && b=${BASELINE:?BASELINE=<binary> to compare with}
      /usr/bin/time -f "%U %S" -o "$work/t" "$b" postmortem "$f" --format json -q >"$work/$x.json" 2>/dev/null
      read -r user sys < "$work/t"; echo "$user + $sys" | bc >> "$work/$x.cpu"
    done
  done
  for x in base new; do
    sort -n "$work/$x.cpu" | awk -v n=$x '{a[NR]=$1} END {printf "  %-4s cpu min %.2f s  median %.2f s  max %.2f s\n", n, a[1], a[int((NR+1)/2)], a[NR]}'
  done
  cmp -s "$work/base.json" "$work/new.json" && echo "  outputs identical" || echo "  OUTPUTS DIFFER"
  exit 0
fi

echo "# postmortem vs diagnose, same file, alternating (${RUNS:-2} runs)"
for hours in 1 6 24; do
  f=$(fleet 64 $hours)
  echo "64 replicas x ${hours} h: $f ($(stat -L -c %s "$f") bytes gzip)"
  for i in $(seq "${RUNS:-2}"); do
    measure "postmortem --format json -q" $bin postmortem "$f" --format json -q
    measure "diagnose --format json" $bin diagnose "$f" --format json
  done
done

echo "# postmortem --prometheus over a day: 4 replicas backfilled"
f=$(fleet 4 24)
python3 -c "import gzip,shutil,sys; shutil.copyfileobj(gzip.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$f" "$work/day.om"
/usr/bin/time -f "  promtool backfill: %e s" promtool tsdb create-blocks-from openmetrics "$work/day.om" "$work/data" >/dev/null
rm -f "$work/day.om"
printf 'global:\n  scrape_interval: 1h\n' > "$work/p.yml"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
prometheus --config.file="$work/p.yml" --storage.tsdb.path="$work/data" --storage.tsdb.retention.time=100y \
  --query.max-samples=200000000 --web.listen-address=127.0.0.1:$port >"$work/log" 2>&1 &
pid=$!
until curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null; do sleep 0.2; done
from=$((T0 + 300)); to=$((T0 + 86400 - 15))
for i in 1 2 3; do
  start=$(date +%s.%N)
  line=$($bin postmortem --prometheus "http://127.0.0.1:$port" --from $from --to $to --step 15s --format json 2>&1 >/dev/null | grep '^queried' || true)
  end=$(date +%s.%N)
  printf '  run %s: whole postmortem %.2f s; %s\n' "$i" "$(echo "$end - $start" | bc)" "$line"
done
# Each adapter's range query alone, as the postmortem sends it (the window before --from too).
for q in '{__name__=~"vllm:.+|process_cpu_seconds_total"}' '{__name__=~"DCGM_.+"}' '{__name__=~"node_.+"}'; do
  for i in 1 2; do
    curl -s -o /dev/null -w "  alone: %{time_total} s  $q\n" --data-urlencode "query=$q" \
      --data-urlencode "start=$((from - 300))" --data-urlencode "end=$to" --data-urlencode "step=15s" \
      "http://127.0.0.1:$port/api/v1/query_range"
  done
done
