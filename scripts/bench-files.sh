#!/usr/bin/env bash
# Measures reading recordings (BENCHMARKS.md, "Files at scale"): `llm-doctor diagnose FILE`
# against `promtool tsdb create-blocks-from openmetrics` on the same plain file, alternating, in
# one run; then the scaling table (replicas and hours), wall time, CPU time and peak memory from
# /usr/bin/time -v. The recordings are made under target/bench by scripts/gen_fixtures.py on
# first use (the day of 64 replicas takes ~5 minutes and 521 MB). Needs promtool
# (scripts/install-test-servers.sh). Usage: scripts/bench-files.sh [promtool|scale|all] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
runs=${2:-3}
cargo build --release --quiet
bin=./target/release/llm-doctor
mkdir -p target/bench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fleet() { # replicas, hours -> path (gzip, streamed by the generator)
  local n=$1 h=$2 tag path
  case $h in 0.1666667) tag=10m ;; *) tag=${h}h ;; esac
  path=target/bench/fleet-$n-$tag.om.gz
  [ -f "$path" ] || python3 scripts/gen_fixtures.py --fleet-bench "$n" "$path" --hours "$h" >&2
  echo "$path"
}

measure() { # label, command... -> "label wall_s cpu_s maxrss_MB"
  local label=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$work/t" "$@" >/dev/null 2>"$work/err" || true
  read -r wall user sys rss < <(tail -n 1 "$work/t")
  printf '%s %s %.2f %.0f\n' "$label" "$wall" "$(echo "$user + $sys" | bc)" "$(echo "$rss / 1024" | bc)"
}

if [ "$what" = promtool ] || [ "$what" = all ]; then
  echo "# llm-doctor diagnose vs promtool import, same plain file, alternating ($runs runs)"
  echo "# file bytes | command wall_s cpu_s peak_MB"
  for spec in "100 0.1666667" "64 1"; do
    gz=$(fleet $spec)
    plain=$work/$(basename "$gz" .gz)
    gzip -dc "$gz" > "$plain"
    echo "$(basename "$plain") $(stat -c %s "$plain")"
    for i in $(seq "$runs"); do
      rm -rf "$work/tsdb"
      measure "  promtool" promtool tsdb create-blocks-from openmetrics "$plain" "$work/tsdb"
      measure "  llm-doctor" "$bin" diagnose "$plain" --format json
      measure "  llm-doctor(gz)" "$bin" diagnose "$gz" --format json
    done
    rm -f "$plain"; rm -rf "$work/tsdb"
  done
fi

if [ "$what" = scale ] || [ "$what" = all ]; then
  echo "# scaling: llm-doctor diagnose FILE.om.gz (replicas x hours at 15 s), best of $runs"
  echo "# replicas hours gz_bytes | wall_s cpu_s peak_MB"
  for spec in "1 0.1666667" "100 0.1666667" "1000 0.1666667" "3000 0.1666667" \
              "64 0.1666667" "64 1" "64 6" "64 24"; do
    gz=$(fleet $spec)
    echo "$spec $(stat -c %s "$gz")"
    for i in $(seq "$runs"); do measure "  run$i" "$bin" diagnose "$gz" --format json; done
  done
fi
