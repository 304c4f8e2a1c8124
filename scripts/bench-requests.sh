#!/usr/bin/env bash
# Reading a million requests: `diagnose` with a gateway log of 1,000,000 nginx JSON lines beside
# a replica's metrics, against `jq -c .` over the same file, in the same run. Two logs:
#   day    a day of traffic (11.6 requests/s) ending where the metrics' 5-minute window ends:
#          what a request log beside a window usually is; only the window's requests are kept.
#   window the million all inside the 5-minute window (3,333 requests/s): every one is kept.
# Prints wall seconds and peak RSS (MB) of each. Usage: scripts/bench-requests.sh [binary]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/llm-doctor}
DIR=${BENCH_DIR:-target/bench/requests}
mkdir -p "$DIR"
METRICS=fixtures/healthy_idle.om.gz
END=1796083807   # the fixture's last sample: its window is the 5 minutes before

for shape in day window; do
  LOG="$DIR/$shape.log"
  if [ ! -s "$LOG" ]; then
    python3 - "$LOG" "$END" "$shape" <<'PY'
import random, sys
path, end, shape = sys.argv[1], float(sys.argv[2]), sys.argv[3]
span = 86400.0 if shape == "day" else 299.0
rng = random.Random(7)
n = 1_000_000
with open(path, "w") as f:
    for i in range(n):
        t = end - span + span * (i + 1) / n
        rt = rng.lognormvariate(0.5, 0.6)
        f.write('{"msec":"%.3f","request_id":"%032x","status":"200","request_time":"%.3f",'
                '"upstream_addr":"gpu-node-1:8000","upstream_connect_time":"0.000",'
                '"upstream_header_time":"%.3f","upstream_response_time":"%.3f",'
                '"request_uri":"/v1/chat/completions"}\n'
                % (t, rng.getrandbits(128), rt, rt * 0.2, rt - 0.001))
PY
  fi
  size=$(du -m "$LOG" | cut -f1)
  jq_s=$( { /usr/bin/time -f "%e %M" jq -c . "$LOG" > /dev/null; } 2>&1 | tail -1)
  ld_s=$( { /usr/bin/time -f "%e %M" "$BIN" diagnose "$METRICS" "$LOG" --format json -q > "$DIR/$shape.json" || true; } 2>&1 | tail -1)
  read -r jq_wall jq_kb <<< "$jq_s"
  read -r ld_wall ld_kb <<< "$ld_s"
  awk -v s="$shape" -v mb="$size" -v jw="$jq_wall" -v jk="$jq_kb" -v lw="$ld_wall" -v lk="$ld_kb" 'BEGIN {
    printf "%-6s %4d MB  jq -c . %6.2f s %5.0f MB   diagnose %6.2f s %5.0f MB   diagnose/jq %.2f\n",
      s, mb, jw, jk / 1024, lw, lk / 1024, lw / jw }'
  grep -o '"[0-9]* of [0-9]* request records[^"]*"' "$DIR/$shape.json" | head -1 || true
  grep -o '"gateway log: [^"]*"' "$DIR/$shape.json" | head -1 || true
done
