#!/usr/bin/env python3
"""Derives tests/data/inputs/vllm_query_range.{json,om.gz} from fixtures/kv_cache_exhaustion.om.gz.

The JSON file is what `curl -G .../api/v1/query --data-urlencode 'query={__name__=~"..."}[6m]'`
answers for a subset of the fixture's series (vLLM gauges, counters and one histogram, dcgm
gauges) over their last 6 minutes (25 scrapes 15 s apart); the .om.gz file holds the same samples as OpenMetrics.
Scrape jitter of a few milliseconds is added to the timestamps so the tests exercise exact
seconds-to-milliseconds conversion. Deterministic: run it again and nothing changes.
"""
import gzip
import json
import os
import re

ROOT = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(ROOT, "../../../fixtures/kv_cache_exhaustion.om.gz")
KEEP = {
    "vllm:num_requests_running": "vllm:num_requests_running",
    "vllm:num_requests_waiting": "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc": "vllm:kv_cache_usage_perc",
    "vllm:cache_config_info": "vllm:cache_config_info",
    "vllm:num_preemptions_total": "vllm:num_preemptions",
    "vllm:generation_tokens_total": "vllm:generation_tokens",
    "vllm:request_success_total": "vllm:request_success",
    "vllm:time_to_first_token_seconds_bucket": "vllm:time_to_first_token_seconds",
    "vllm:time_to_first_token_seconds_sum": "vllm:time_to_first_token_seconds",
    "vllm:time_to_first_token_seconds_count": "vllm:time_to_first_token_seconds",
    "DCGM_FI_DEV_GPU_UTIL": "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED": "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE": "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_RESERVED": "DCGM_FI_DEV_FB_RESERVED",
}
LINE = re.compile(r'^([^{\s]+)(\{[^}]*\})?\s+(\S+)\s+(\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

with gzip.open(FIXTURE, "rt") as f:
    lines = f.read().splitlines()

types = {}
samples = {}  # (name, labels tuple) -> [(t, v)]
for line in lines:
    if line.startswith("# TYPE "):
        _, _, fam, ty = line.split(" ")
        types[fam] = ty
        continue
    if line.startswith("#") or not line:
        continue
    m = LINE.match(line)
    name, labels, value, ts = m.groups()
    if name not in KEEP:
        continue
    key = (name, tuple(LABEL.findall(labels or "")))
    samples.setdefault(key, []).append((int(ts), value))

jitter = [3, 117, 0, 250, 41, 999, 8]

result = []
om = []
families = sorted(set(KEEP.values()))
for fam in families:
    om.append(f"# TYPE {fam} {types[fam]}")
for (name, labels), points in sorted(samples.items()):
    kept = points[-25:]  # the last 6 minutes of this series: 25 scrapes 15 s apart
    values = []
    for i, (t, v) in enumerate(kept):
        ms = jitter[(i + len(labels)) % len(jitter)]
        ts = f"{t}.{ms:03d}" if ms else str(t)
        values.append([float(ts), v])
        lab = ",".join(f'{k}="{x}"' for k, x in labels)
        om.append(f"{name}{{{lab}}} {v} {ts}")
    metric = {"__name__": name}
    metric.update(dict(labels))
    result.append({"metric": metric, "values": values})

# OpenMetrics wants a family's samples together, in order: sort the sample lines by family.
head = [l for l in om if l.startswith("#")]
body = [l for l in om if not l.startswith("#")]
fam_of = lambda l: KEEP[LINE.match(l).group(1)]
body.sort(key=lambda l: (fam_of(l), LINE.match(l).group(1), LINE.match(l).group(2) or "", float(LINE.match(l).group(4))))
out = []
for fam in families:
    out.append(f"# TYPE {fam} {types[fam]}")
    out.extend(l for l in body if fam_of(l) == fam)
out.append("# EOF")

answer = {"status": "success", "data": {"resultType": "matrix", "result": result}}
with open(os.path.join(ROOT, "vllm_query_range.json"), "w") as f:
    f.write('{"status":"success","data":{"resultType":"matrix","result":[\n')
    f.write(",\n".join(json.dumps(r, separators=(",", ":")) for r in result))
    f.write("\n]}}\n")
# mtime=0 and no file name in the header: the same bytes every run.
with open(os.path.join(ROOT, "vllm_query_range.om.gz"), "wb") as raw:
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
        f.write(("\n".join(out) + "\n").encode())
