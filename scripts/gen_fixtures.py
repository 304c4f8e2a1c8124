#!/usr/bin/env python3
"""Deterministic OpenMetrics fixture generator for llm-doctor.

Writes one OpenMetrics 1.0 recording per scenario of ``fixtures/scenarios.yaml`` to
``fixtures/<name>.om``: what Prometheus would hold after scraping one vLLM V1 replica
(job "vllm", ``<host>:8000``), its dcgm-exporter (job "dcgm", ``<host>:9400``) and its
node_exporter (job "node", ``<host>:9100``) every ``interval_s`` for ``duration_s``. The data is
built so that the canonical signals of ``rules/signals/{vllm,dcgm,node}.yaml``, computed over the
**last 5 minutes** with Prometheus semantics (window end = newest sample), come out at the
scenario's targets. ``engine:`` swaps vLLM for SGLang, TGI, Triton + TensorRT-LLM, trtllm-serve
or llama.cpp (ENGINE PROFILES below; their adapters are read instead of vllm.yaml), and
``fleet:`` puts several replicas in one file (FLEETS below).

Requires Python 3.9+ and PyYAML (``pip install pyyaml``; used to read scenarios.yaml and, with
``--verify``, the adapter rules). Nothing else.

Usage
    python3 scripts/gen_fixtures.py                 # write every fixtures/<name>.om
    python3 scripts/gen_fixtures.py --only NAME     # write one
    python3 scripts/gen_fixtures.py --check         # exit 1 if a committed .om is stale/missing
    python3 scripts/gen_fixtures.py --verify NAME   # target vs recomputed signal table
    python3 scripts/gen_fixtures.py --bench OUT.om [--verify bench]   # large benchmark file
    python3 scripts/gen_fixtures.py --fleet-bench N OUT.om   # N replicas in one file (OUT.om.gz: gzip)
    python3 scripts/gen_fixtures.py --fleet-bench N OUT.om.gz --hours H [--step S]   # streamed, any size
    options: --scenarios FILE, --out DIR (defaults fixtures/scenarios.yaml, fixtures/), --list

--verify parses the written file, evaluates every signal of rules/signals/{<engine>,dcgm,node}.yaml
(in that order; like the program, a signal an earlier adapter cannot compute is taken from a
later one) with Prometheus' algorithms (extrapolated rate, histogram_quantile, left-open 5-minute window
ending at the newest sample) and prints target | model | computed | status. `model` is the
generator's own unrounded value over the window. Status: ok; ok* the target is not representable
with the bucket bounds (nearest reachable value hit); ok# too few observations in the window for
integer counts to get closer; ok~ a ramped histogram target, matched against the window's mix;
OFF / MISSING / UNEXPECTED fail (exit 1). Gauge rows also show window min/avg/max, which the
playbooks read through min/avg/max_over_time. Exit 0 when all rows pass. For other engines the
table is followed by the facts the adapter reads from metrics (gauge_facts, info_facts,
label_facts) and the canonical signals that engine does not export (the program reports them
unknown). A fleet prints one table per member (its series selected by pod, else by host).

Scenario file
-------------
::

    defaults:                 # merged under every scenario (scenario keys win; `signals` and
      duration_s: 600         #   `labels` are merged key by key, `omit` lists are concatenated)
      interval_s: 15          # scrape interval
      start: 1796083200       # Unix seconds of the first vLLM scrape (2026-12-01T00:00:00Z)
      gpus: 1                 # dcgm-exporter GPUs (the vLLM replica uses all of them, TP=gpus)
      cpus: 4                 # node_exporter CPUs
      model: Qwen/Qwen2.5-7B-Instruct
      host: gpu-node-1        # instance = <host>:8000 / :9400 / :9100, dcgm Hostname label
      max_model_len: 32768    # top of the 1-2-5 token buckets; also cache_config_info
      num_gpu_blocks: 64782   # cache_config_info label
      uptime_s: 10800         # how long vLLM ran before the first scrape (counter start values)
      scrape_offsets_s: {vllm: 0, dcgm: 3, node: 7}   # per-job scrape phase, like Prometheus
      noise: 1.0              # scales the built-in small jitter of plain-number targets (0 = none)
      vllm_names: current     # current | legacy (pre-0.9 V1: gpu_cache_usage_perc,
                              #   gpu_prefix_cache_{queries,hits}, time_per_output_token_seconds
                              #   instead of the new names) | both (0.9/0.10: old and new side by side)
      extras: false           # also emit the non-signal families a real server has
                              #   (request_params_*, inference time, TPOT, prompt_tokens_by_source,
                              #   sleep state, http_requests, python/process gauges, node_load*,
                              #   DCGM MEM_COPY/ENC/DEC util, remapped rows). Bigger files.
      gpu_memory_utilization: 0.9   # vLLM's --gpu-memory-utilization (cache_config_info label)
      restarts: []            # seconds into the recording at which the API server restarted
                              #   (its process_start_time_seconds moves there)
      labels: {}              # extra labels put on every series (e.g. {cluster: eu-1})
      omit: []                # families to leave out, see below
      engine: vllm            # vllm | sglang | tgi | triton | trtllm_serve | llamacpp
      tgi_summaries: false    # tgi: *_duration as rolling summaries instead of histograms
      triton_histograms: false  # triton: nv_inference_first_response_histogram_ms (TTFT)
      triton_summaries: false   # triton: nv_inference_{request,queue,compute_infer}_summary_us
      triton_ttft_buckets_ms: null  # triton: first-response buckets (default 100, 500, 2000, 5000)
      max_batch_size: 256     # triton: nv_trt_llm_request_metrics{request_type="max"}
      max_batch_total_tokens: null  # tgi: tgi_batch_max_total_tokens (default num_gpu_blocks*16)
      llamacpp_kv_metrics: false  # llamacpp: kv_cache_usage_ratio/kv_cache_tokens (2024 builds)
      fleet: null             # a list of replicas instead of one (see FLEETS)
      signals: {...}          # canonical signal -> target (see below)
    scenarios:
      - name: kv_cache_exhaustion     # -> fixtures/kv_cache_exhaustion.om ([A-Za-z0-9_.-]+)
        description: "..."            # free text, ignored
        signals: {kv_cache_usage_ratio: 0.99, queue_depth: {from: 5, to: 180}}
        omit: [DCGM_FI_DEV_CLOCKS_EVENT_REASONS]

Signal targets (every key is a canonical signal name from rules/catalog.yaml):

``3.5``                            constant target
``{from: a, to: b}``               linear ramp over the whole recording
``{before: a, after: b, at_s: t}`` step at t seconds after the first scrape
``{base: a, pulse: b, start_s: s, end_s: e}``  b from s to e seconds, a before and after (a burst)
``{mean: m, jitter: j}``           constant m, each scrape off by up to +-j (uniform)
``{min: a, max: b}``               gauge swinging between a and b; both extremes are reached in
                                   the last 5 minutes, the last scrape is (a+b)/2
``jitter: j`` may be added to from/to and before/after too (absolute amplitude). Jitter applies
to gauges and counter rates; histogram targets take from/to/before/after but no jitter.
Numbers such as ``1.2e8`` are accepted although YAML 1.1 reads them as strings.
``auto``                           derived from other signals (see AUTO below)
``null``                           not emitted: the metric families behind the signal are left
                                   out (see SIGNAL_FAMILIES: siblings sharing a family go with it,
                                   e.g. ttft_p99_seconds: null removes all three TTFT signals)

What a target means for each kind of signal (this is what --verify compares):
* gauges (queue_depth, running_requests, kv_cache_usage_ratio, GPU gauges, xid code): the value
  at the *last* scrape, which is exact (noise is zero there; integer gauges are rounded). Plain
  numbers get a small built-in jitter elsewhere (DEFAULT_NOISE, scaled by `noise`);
  ``{mean, jitter}``/``{min, max}`` set it explicitly. Playbooks also read avg/min/max over the
  window: shape those with jitter or min/max (e.g. avg_over_time(queue_depth) >= 1 is a backlog).
* rates and ratios of rates (requests/tokens per second, preemptions, prefix hit, truncation,
  error, spec acceptance, frontend CPU, host CPU shares, PCIe replays, NVLink): the mean of the
  target over the last 5 minutes; jitter is exactly zero-mean inside the window and integer
  counters are rounded so the window's increase is off by at most half an event (at 0.2 req/s a
  0.5% error ratio is 0 of 57 requests: --verify reports such rows as count-limited).
* histogram quantiles/means: the distribution of the requests finished in the window. Bucket
  counts come from the CDF (no sampling) of a log-normal whose parameters are solved so that
  Prometheus' bucket interpolation, not the log-normal itself, gives the target p50/p99. When the
  buckets make a target unreachable (e.g. a p99 below 0.297 s in the 0.3 s first bucket of the
  queue/prefill histograms; or ITL p50 0.022 with p99 0.04: p99 in (0.025, 0.05] needs
  F(0.025) >= 0.975, which puts p50 below 0.018) the nearest reachable value is used, the
  generator prints a warning and --verify says so. Integer bucket increments inside the window
  are then chosen (greedy, one observation at a time) so that the file's quantiles match the
  float model as closely as integers allow. Means come from ``_sum`` and are exact.
* gpu_power_throttle_ratio / gpu_thermal_throttle_ratio: share of the last-5-minute scrapes with
  DCGM_FI_DEV_CLOCKS_EVENT_REASONS bit 0x4 / 0x20 set (resolution 1/20 at 15 s). GPU_IDLE
  (0x1) is also set in a share 1 - 4 * gpu_utilization of scrapes; it is in neither mask.
* gpu_ecc_uncorrectable_errors: DBE errors that appear inside the window (counter starts at 0).
  Prometheus extrapolates increase() to the window end, so with the staggered scrape offsets
  it reads ~1.4% high (3 errors -> 3.04).
* host CPU: one core (cpu="1") is pegged at host_cpu_busiest_core_ratio, the others share the
  rest so the mean is host_cpu_utilization_ratio; iowait is split in proportion to busy time
  (it counts as busy: 1 - idle); jitter of both follows host_cpu_utilization_ratio's.
* With several GPUs, "avg" signals are the mean over GPUs (per-GPU values differ, zero-sum),
  "max"/"min" signals are held by GPU 0 and the other GPUs stay below/above it.

AUTO (used when a signal is ``auto``; the built-in defaults use it for these):
    ttft_mean / itl_mean      = log-normal mean through p50 and p99
    decode_time_mean          = itl_mean * (output_tokens_mean - 1)
    e2e_mean                  = ttft_mean + decode_time_mean
    e2e_p50 / e2e_p99         = ttft_p50 + 0.75 * decode_mean / ttft_p99 + 3 * decode_mean
    output_tokens_per_second  = requests_per_second * output_tokens_mean
    prompt_tokens_per_second  = requests_per_second * prompt_tokens_mean
    running_requests          = requests_per_second * (e2e_mean - queue_time_mean), <= 256
    iteration_tokens_mean     = (prompt tps * (1 - prefix hit) + output tps) / engine steps/s,
                                steps/s = min(1, running) / itl_mean

``omit`` entries: a family name as in ``# TYPE`` (``vllm:num_preemptions``), a sample name
(``vllm:num_preemptions_total``), or a whole job (``vllm``, ``dcgm``, ``node``). Unknown
entries print a warning. dcgm-exporter fields outside its default CSV that are emitted unless
omitted: CLOCKS_EVENT_REASONS, ENFORCED_POWER_LIMIT, MAX_SM_CLOCK, ECC_DBE_VOL_TOTAL (omit all
four for "default counters only"). spec_decode_acceptance_ratio is emitted only when set.

--bench writes the BENCH scenario (8 x H100 TP=8, 70B model, 16 CPUs, 10 min at 15 s, healthy
busy; ~4.1 MB: eight GPUs' dcgm series alone are ~2.3 MB) from the built-in defaults only, so
edits to scenarios.yaml do not change it.

ENGINE PROFILES (``engine:``; reference/engine-metrics.md §2-§5, rules/signals/<adapter>.yaml).
The same targets, exported the way that engine does; what its adapter cannot compute is not
emitted. GPU (dcgm) and host (node) series are as for vLLM. Counters that the engine writes
without ``_total`` (TGI, Triton, llama.cpp's n_busy_slots_per_decode and n_tokens_max) are typed
``unknown``: an OpenMetrics counter must have ``_total`` samples.
* sglang (job "sglang", :30000): scheduler metrics labelled model_name, engine_type="unified",
  tp_rank/pp_rank/moe_ep_rank "0"; tokenizer metrics model_name only. SGLang's default buckets
  (TTFT from 0.1 s, ITL, e2e, queue time from 0; per-stage prefill_forward 1 ms x 1.62^k).
  requests_per_second = sglang:num_requests_total, aborted requests on top (error_ratio =
  aborted / (finished + aborted)); prompt/output_tokens_mean = token counters / requests;
  preemptions = num_retracted_requests_total; prefix hits = cached_tokens_total{cache_source=
  "total"} (device and host rows too); frontend_cpu_cores = process_cpu_seconds_total
  {component="tokenizer"}; spec_decode_acceptance_ratio = the spec_accept_rate gauge (last
  value). cache_config_info{page_size="1",num_pages}, max_total_num_tokens, gen_throughput,
  num_used_tokens. No itl_mean (the adapter does not read it), truncation, iteration tokens.
* tgi (job "tgi", :3000; no labels): tgi_request_{count,success,failure{err}} (unknown type;
  failure only once non-zero), tgi_queue_size, tgi_batch_current_size, tgi_batch_current_max_tokens
  (= kv_cache_usage_ratio x tgi_batch_max_total_tokens); *_duration histograms with TGI's
  0.0001*1.5^k buckets (or rolling summaries, ``tgi_summaries``: quantiles 0 ... 1, exact targets at
  the last scrape), itl = tgi_request_mean_time_per_token_duration; token-length histograms with
  max_total_tokens/100 steps (max_input_tokens = max_model_len - 1). Token rates are the token
  histograms' _sum rates (requests x mean length). No TTFT, prefix, preemption, truncation.
* triton (job "triton", :8002; model="tensorrt_llm", version="1"): µs counters (e2e_mean /
  queue_time_mean = duration rate / request rate), request_success/failure{reason}, count,
  exec_count, pending_request_count (= queue_depth), nv_trt_llm_request_metrics (active = running,
  max = max_batch_size, waiting = queue_depth), kv_cache_block_metrics (64 tokens per block),
  inflight_batcher and general metrics, nv_llm_{input,output}_token_len (buckets 10 ... 1000);
  Triton's own nv_gpu_* (same UUIDs as dcgm) and nv_cpu_utilization, which its adapter reads
  before dcgm's and node's (gpu_utilization/memory/power ratio, host_cpu_utilization_ratio are
  then gauges). TTFT only with ``triton_histograms`` (a TTFT above the top bucket reads as it: 5 s
  by default), e2e/queue p50/p99 only with ``triton_summaries``. No ITL.
* trtllm_serve (job "trtllm", :8000; model_name, engine_type="trtllm"): vLLM-like histograms and
  request_success_total{finished_reason}, request_error_total{http_code}, prompt_tokens_total,
  prompt_cached_tokens_total, server_queue_length, num_active_requests, kv_cache_utilization,
  kv_cache_hit_rate. No output token counter.
* llamacpp (job "llamacpp", :8080; no labels): counters as llama-server prints them (6
  significant digits; seconds truncated to ms); itl_mean = tokens_predicted_seconds /
  tokens_predicted; n_decode_total at the engine-step rate; prompt_seconds grows by
  prefill_time_mean_seconds per llama_decode() call, because that is what llamacpp.yaml divides
  (pick the target accordingly: ~prompt seconds per second / decode calls per second);
  requests_processing/deferred = running/queue; kv gauges only with ``llamacpp_kv_metrics``.

FLEETS: ``fleet: [{scenario: NAME, host: H, pod: P}, ...]`` writes ONE file with a replica per
entry: the named scenario (any other entry key, e.g. ``signals``, is merged over it) with its own
host (instance, dcgm Hostname) and, when given, a ``pod`` label on all of its series (engine,
dcgm, node). Each member has its own noise (its name is <fleet>.<index>.<scenario>). The file
holds each family once (HELP/TYPE), then every member's series of it, each in time order.
``--fleet-bench N OUT`` writes N single-GPU vLLM replicas from the built-in defaults (hosts
gpu-node-001..., pods vllm-0...; load spread by a hash of the index; every 20th from the 8th on is
faulty: KV exhaustion, thermal throttling, a small batch limit, an XID 79 in turn). N=100: ~188 MB
of text (1.07 M lines), ~6 MB gzipped.

Output format: ``# HELP``/``# TYPE`` per family; counters declared without ``_total`` and
sampled with it (dcgm counters keep their exporter names, which have no ``_total``);
histograms as ``_bucket{le}`` (vLLM's real default bounds, le spelled as prometheus_client
does: "1.0"), ``_count``, ``_sum`` grouped per timestamp; labels sorted as Prometheus stores
them; values in Go's shortest %g form as Prometheus prints them; integer timestamps in seconds;
``# EOF`` last. Randomness comes from random.Random seeded with zlib.crc32 of the scenario name
(and a per-series tag), so output is byte-identical across runs. Size: the nine mandatory vLLM
histograms alone are ~1.3 MB per 10 minutes at 15 s; a default fixture is ~1.7 MB. Halve it
with interval_s: 30 or duration_s: 300 (both keep >= 10 scrapes in the 5-minute window).
"""

from __future__ import annotations

import argparse
import gzip
import decimal
import math
import os
import random
import re
import statistics
import struct
import sys
import tempfile
import zlib
from pathlib import Path

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.exit("gen_fixtures.py needs PyYAML: pip install pyyaml")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SCENARIOS_FILE = FIXTURES / "scenarios.yaml"
RULES_DIR = ROOT / "rules" / "signals"
WINDOW_S = 300
Z99 = 2.3263478740408408  # standard normal 0.99 quantile
INF = float("inf")

# ----------------------------------------------------------------------------------------------
# vLLM V1 default bucket bounds (vllm/v1/metrics/loggers.py, reference/engine-metrics.md §1.1)
TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
               7.5, 10.0, 20.0, 40.0, 80.0]
REQ_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
               60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
ITER_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
PARAMS_N_BUCKETS = [1, 2, 5, 10, 20]


def buckets_125(max_value):
    """vLLM build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... <= max_value."""
    out, exp = [], 0
    while True:
        for m in (1, 2, 5):
            v = m * 10 ** exp
            if v > max_value:
                return out
            out.append(v)
        exp += 1


# ----------------------------------------------------------------------------------------------
# Canonical signals: kind, and the families that carry them (for `null`).
SIGNAL_FAMILIES = {
    "ttft_p50_seconds": ["vllm:time_to_first_token_seconds"],
    "ttft_p99_seconds": ["vllm:time_to_first_token_seconds"],
    "ttft_mean_seconds": ["vllm:time_to_first_token_seconds"],
    "itl_p50_seconds": ["vllm:inter_token_latency_seconds"],
    "itl_p99_seconds": ["vllm:inter_token_latency_seconds"],
    "itl_mean_seconds": ["vllm:inter_token_latency_seconds"],
    "e2e_p50_seconds": ["vllm:e2e_request_latency_seconds"],
    "e2e_p99_seconds": ["vllm:e2e_request_latency_seconds"],
    "e2e_mean_seconds": ["vllm:e2e_request_latency_seconds"],
    "queue_time_p99_seconds": ["vllm:request_queue_time_seconds"],
    "queue_time_mean_seconds": ["vllm:request_queue_time_seconds"],
    "prefill_time_mean_seconds": ["vllm:request_prefill_time_seconds"],
    "prefill_time_p99_seconds": ["vllm:request_prefill_time_seconds"],
    "decode_time_mean_seconds": ["vllm:request_decode_time_seconds"],
    "requests_per_second": ["vllm:request_success"],
    "output_tokens_per_second": ["vllm:generation_tokens"],
    "prompt_tokens_per_second": ["vllm:prompt_tokens"],
    "queue_depth": ["vllm:num_requests_waiting"],
    "running_requests": ["vllm:num_requests_running"],
    "prompt_tokens_p99": ["vllm:request_prompt_tokens"],
    "prompt_tokens_mean": ["vllm:request_prompt_tokens"],
    "output_tokens_mean": ["vllm:request_generation_tokens"],
    "iteration_tokens_mean": ["vllm:iteration_tokens_total"],
    "kv_cache_usage_ratio": ["vllm:kv_cache_usage_perc"],
    "preemptions_per_second": ["vllm:num_preemptions"],
    "prefix_cache_hit_ratio": ["vllm:prefix_cache_queries", "vllm:prefix_cache_hits"],
    "truncation_ratio": None,  # part of vllm:request_success: cannot be removed alone
    "error_ratio": None,
    "abort_ratio": None,
    "spec_decode_acceptance_ratio": ["vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                                     "vllm:spec_decode_num_accepted_tokens",
                                     "vllm:spec_decode_num_accepted_tokens_per_pos"],
    "frontend_cpu_cores": ["process_cpu_seconds"],
    "gpu_utilization_ratio": ["DCGM_FI_DEV_GPU_UTIL"],
    "sm_active_ratio": ["DCGM_FI_PROF_GR_ENGINE_ACTIVE"],
    "tensor_active_ratio": ["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"],
    "dram_active_ratio": ["DCGM_FI_PROF_DRAM_ACTIVE"],
    "gpu_memory_used_ratio": ["DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED"],
    "gpu_temperature_celsius": ["DCGM_FI_DEV_GPU_TEMP"],
    "gpu_power_ratio": ["DCGM_FI_DEV_ENFORCED_POWER_LIMIT"],
    "sm_clock_ratio": ["DCGM_FI_DEV_MAX_SM_CLOCK"],
    "gpu_power_throttle_ratio": ["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"],
    "gpu_thermal_throttle_ratio": ["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"],
    "gpu_xid_error_code": ["DCGM_FI_DEV_XID_ERRORS"],
    "gpu_ecc_uncorrectable_errors": ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"],
    "gpu_row_remap_failure": ["DCGM_FI_DEV_ROW_REMAP_FAILURE"],
    "pcie_bytes_per_second": ["DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES"],
    "pcie_replays_per_second": ["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"],
    "nvlink_bytes_per_second": ["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"],
    "host_cpu_utilization_ratio": ["node_cpu_seconds"],
    "host_cpu_busiest_core_ratio": ["node_cpu_seconds"],
    "host_cpu_iowait_ratio": ["node_cpu_seconds"],
    "host_cpu_pressure_ratio": ["node_pressure_cpu_waiting_seconds"],
}

# How --verify reads each target (see the docstring): gauge = last scrape, rate = window mean,
# hist = window distribution, share = window share of scrapes, count = events in window.
SIGNAL_KIND = {s: "hist" for s in SIGNAL_FAMILIES if s.endswith(("_seconds", "_p99", "_mean"))}
SIGNAL_KIND.update({s: "rate" for s in [
    "requests_per_second", "output_tokens_per_second", "prompt_tokens_per_second",
    "preemptions_per_second", "prefix_cache_hit_ratio", "truncation_ratio", "error_ratio",
    "abort_ratio", "spec_decode_acceptance_ratio", "frontend_cpu_cores", "pcie_replays_per_second",
    "nvlink_bytes_per_second", "host_cpu_utilization_ratio", "host_cpu_busiest_core_ratio",
    "host_cpu_iowait_ratio", "host_cpu_pressure_ratio"]})
SIGNAL_KIND.update({s: "gauge" for s in [
    "queue_depth", "running_requests", "kv_cache_usage_ratio", "gpu_utilization_ratio",
    "sm_active_ratio", "tensor_active_ratio", "dram_active_ratio", "gpu_memory_used_ratio",
    "gpu_temperature_celsius", "gpu_power_ratio", "sm_clock_ratio", "gpu_xid_error_code",
    "gpu_row_remap_failure", "pcie_bytes_per_second"]})
SIGNAL_KIND.update({"gpu_power_throttle_ratio": "share", "gpu_thermal_throttle_ratio": "share",
                    "gpu_ecc_uncorrectable_errors": "count"})

# Built-in defaults: a healthy, busy H100 running Qwen2.5-7B. scenarios.yaml `defaults` and each
# scenario override these.
BUILTIN = {
    "duration_s": 600, "interval_s": 15, "start": 1796083200, "gpus": 1, "cpus": 4,
    "model": "Qwen/Qwen2.5-7B-Instruct", "host": "gpu-node-1", "max_model_len": 32768,
    "num_gpu_blocks": 64782, "uptime_s": 10800,
    "scrape_offsets_s": {"vllm": 0, "dcgm": 3, "node": 7},
    "noise": 1.0, "extras": False, "labels": {}, "omit": [], "vllm_names": "current", "restarts": [],
    "gpu_memory_utilization": 0.9,
    # engine profiles (see ENGINES) and their options; fleets
    "engine": "vllm", "tgi_summaries": False, "triton_histograms": False, "triton_summaries": False,
    "max_batch_size": 256, "max_batch_total_tokens": None, "llamacpp_kv_metrics": False,
    "triton_ttft_buckets_ms": None,
    "fleet": None,
    "signals": {
        "requests_per_second": 4.0,
        "ttft_p50_seconds": 0.12, "ttft_p99_seconds": 0.4, "ttft_mean_seconds": "auto",
        "itl_p50_seconds": 0.017, "itl_p99_seconds": 0.04, "itl_mean_seconds": "auto",
        "e2e_p50_seconds": "auto", "e2e_p99_seconds": "auto", "e2e_mean_seconds": "auto",
        "queue_time_p99_seconds": 0.3, "queue_time_mean_seconds": 0.02,
        "prefill_time_mean_seconds": 0.06, "prefill_time_p99_seconds": 0.3,
        "decode_time_mean_seconds": "auto",
        "output_tokens_per_second": "auto", "prompt_tokens_per_second": "auto",
        "queue_depth": {"mean": 0.3, "jitter": 0.7}, "running_requests": "auto",
        "prompt_tokens_p99": 6000, "prompt_tokens_mean": 1000, "output_tokens_mean": 250,
        "iteration_tokens_mean": "auto",
        "kv_cache_usage_ratio": 0.5, "preemptions_per_second": 0.0,
        "prefix_cache_hit_ratio": 0.3, "truncation_ratio": 0.02, "error_ratio": 0.005, "abort_ratio": 0.0,
        "spec_decode_acceptance_ratio": None, "frontend_cpu_cores": 0.35,
        "gpu_utilization_ratio": 0.72, "sm_active_ratio": 0.55, "tensor_active_ratio": 0.22,
        "dram_active_ratio": 0.45, "gpu_memory_used_ratio": 0.91,
        "gpu_temperature_celsius": 58, "gpu_power_ratio": 0.62, "sm_clock_ratio": 1.0,
        "gpu_power_throttle_ratio": 0.0, "gpu_thermal_throttle_ratio": 0.0,
        "gpu_xid_error_code": 0, "gpu_ecc_uncorrectable_errors": 0, "gpu_row_remap_failure": 0,
        "pcie_bytes_per_second": 1.2e8, "pcie_replays_per_second": 0.0,
        "nvlink_bytes_per_second": 0.0,
        "host_cpu_utilization_ratio": 0.18, "host_cpu_busiest_core_ratio": 0.45,
        "host_cpu_iowait_ratio": 0.004, "host_cpu_pressure_ratio": 0.02,
    },
}

# Relative amplitude of the built-in jitter for plain-number targets (times `noise`).
DEFAULT_NOISE = {
    "requests_per_second": 0.08, "output_tokens_per_second": 0.08, "prompt_tokens_per_second": 0.1,
    "preemptions_per_second": 0.2, "frontend_cpu_cores": 0.1, "running_requests": 0.1,
    "kv_cache_usage_ratio": 0.05, "gpu_utilization_ratio": 0.04, "sm_active_ratio": 0.05,
    "tensor_active_ratio": 0.06, "dram_active_ratio": 0.05, "gpu_power_ratio": 0.04,
    "pcie_bytes_per_second": 0.2, "nvlink_bytes_per_second": 0.1,
    "host_cpu_utilization_ratio": 0.06, "host_cpu_iowait_ratio": 0.2,
    "host_cpu_pressure_ratio": 0.2, "pcie_replays_per_second": 0.2,
}
ABS_NOISE = {"gpu_temperature_celsius": 1.0}

# The large benchmark scenario (--bench): 8 x H100, TP=8, a 70B model, healthy and busy. 8 GPUs
# alone make ~3.5 MB at 10 min / 15 s; 16 CPUs and no extras give ~4.1 MB (64 CPUs + extras: ~7 MB).
BENCH = {
    "name": "bench", "gpus": 8, "cpus": 16, "extras": False, "host": "gpu-node-8x",
    "model": "meta-llama/Llama-3.3-70B-Instruct", "max_model_len": 131072, "num_gpu_blocks": 40960,
    "signals": {"requests_per_second": 12, "nvlink_bytes_per_second": 4.0e10,
                "gpu_utilization_ratio": 0.78, "host_cpu_utilization_ratio": 0.12,
                "itl_p50_seconds": 0.03, "itl_p99_seconds": 0.055,
                "ttft_p50_seconds": 0.2, "ttft_p99_seconds": 0.7},
}

JOBS = ("vllm", "dcgm", "node")

# vLLM names before 0.9 (reference/engine-metrics.md §1.3); `vllm_names: legacy|both`.
LEGACY_NAMES = {
    "vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc",
    "vllm:prefix_cache_queries": "vllm:gpu_prefix_cache_queries",
    "vllm:prefix_cache_hits": "vllm:gpu_prefix_cache_hits",
    "vllm:inter_token_latency_seconds": "vllm:time_per_output_token_seconds",
}


def signal_families(sig):
    return SIGNAL_FAMILIES[sig] or ["vllm:request_success"]


def signal_job(sig):
    f = signal_families(sig)[0]
    return "dcgm" if f.startswith("DCGM_") else "node" if f.startswith("node_") else "vllm"


# ----------------------------------------------------------------------------------------------
# Engine profiles beyond vLLM (reference/engine-metrics.md §2-§5; rules/signals/<adapter>.yaml)

# engine -> (scrape job, port, adapter file, display name)
ENGINES = {
    "vllm": ("vllm", 8000, "vllm.yaml", "vLLM"),
    "sglang": ("sglang", 30000, "sglang.yaml", "SGLang"),
    "tgi": ("tgi", 3000, "tgi.yaml", "TGI"),
    "triton": ("triton", 8002, "triton.yaml", "Triton"),
    "trtllm_serve": ("trtllm", 8000, "trtllm_serve.yaml", "trtllm-serve"),
    "llamacpp": ("llamacpp", 8080, "llamacpp.yaml", "llama.cpp"),
}

# SGLang defaults (python/sglang/srt/observability/metrics_collector.py @ 44cedc2)
SGL_TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
SGL_ITL_BUCKETS = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
                   0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000]
SGL_E2E_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200,
                   1800, 2400]
SGL_QUEUE_BUCKETS = [0.0, 0.001, 0.005, 0.010, 0.050, 0.100, 0.200, 0.500, 1, 2, 3, 4, 5, 10, 15, 20, 30,
                     40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200,
                     1400, 1600, 1800, 2000, 2500, 3000]
SGL_STAGE_BUCKETS = [0.001 * (1.62 ** i) for i in range(30)]  # exponential_buckets(0.001, 1.62, 30)


def _tgi_duration_buckets():
    """TGI router: `value *= 1.5` 35 times from 0.0001 (0.00015 s ... 145.6 s)."""
    out, value = [], 0.0001
    for _ in range(35):
        value *= 1.5
        out.append(value)
    return out


TGI_DURATION_BUCKETS = _tgi_duration_buckets()
TRITON_FIRST_RESPONSE_MS = [100, 500, 2000, 5000]
TRITON_TOKEN_BUCKETS = [10, 50, 100, 500, 1000]
TRITON_SUMMARY_QUANTILES = [0.5, 0.9, 0.95, 0.99, 0.999]
TGI_SUMMARY_QUANTILES = [0.0, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0]


def engine_signals(cfg):
    """For an engine other than vLLM: canonical signal -> (families, kind) that the engine exports
    with this scenario's options (what its adapter computes). `families` are the metric families
    a `null` target removes (None: derived, cannot be null on its own). Kind as in SIGNAL_KIND;
    ratios of rates and counter-based means are read like histogram means ("hist")."""
    e = cfg.get("engine", "vllm")
    H, R, G = "hist", "rate", "gauge"
    if e == "sglang":
        ttft, itl = ["sglang:time_to_first_token_seconds"], ["sglang:inter_token_latency_seconds"]
        e2e, q = ["sglang:e2e_request_latency_seconds"], ["sglang:queue_time_seconds"]
        return {
            "ttft_p50_seconds": (ttft, H), "ttft_p99_seconds": (ttft, H), "ttft_mean_seconds": (ttft, H),
            "itl_p50_seconds": (itl, H), "itl_p99_seconds": (itl, H),
            "e2e_p50_seconds": (e2e, H), "e2e_p99_seconds": (e2e, H), "e2e_mean_seconds": (e2e, H),
            "queue_time_p99_seconds": (q, H), "queue_time_mean_seconds": (q, H),
            "prefill_time_mean_seconds": (["sglang:per_stage_req_latency_seconds"], H),
            "requests_per_second": (["sglang:num_requests"], R),
            "output_tokens_per_second": (["sglang:realtime_tokens", "sglang:generation_tokens"], R),
            "prompt_tokens_per_second": (["sglang:prompt_tokens"], R),
            "queue_depth": (["sglang:num_queue_reqs"], G),
            "running_requests": (["sglang:num_running_reqs"], G),
            "prompt_tokens_mean": (None, H), "output_tokens_mean": (None, H),
            "kv_cache_usage_ratio": (["sglang:token_usage", "sglang:num_used_tokens"], G),
            "preemptions_per_second": (["sglang:num_retracted_requests"], R),
            "prefix_cache_hit_ratio": (["sglang:cached_tokens"], R),
            "abort_ratio": (["sglang:num_aborted_requests"], R),
            "spec_decode_acceptance_ratio": (["sglang:spec_accept_rate", "sglang:spec_accept_length"], G),
            "frontend_cpu_cores": (["sglang:process_cpu_seconds"], R),
        }
    if e == "tgi":
        qk = G if cfg.get("tgi_summaries") else H  # summaries: the quantile is read as a gauge
        dur, qd = ["tgi_request_duration"], ["tgi_request_queue_duration"]
        tpt = ["tgi_request_mean_time_per_token_duration"]
        inp, gen = ["tgi_request_input_length"], ["tgi_request_generated_tokens"]
        return {
            "e2e_p50_seconds": (dur, qk), "e2e_p99_seconds": (dur, qk), "e2e_mean_seconds": (dur, H),
            "queue_time_p99_seconds": (qd, qk), "queue_time_mean_seconds": (qd, H),
            "itl_p50_seconds": (tpt, qk), "itl_p99_seconds": (tpt, qk), "itl_mean_seconds": (tpt, H),
            "requests_per_second": (["tgi_request_success"], R),
            "output_tokens_per_second": (gen, R), "prompt_tokens_per_second": (inp, R),
            "queue_depth": (["tgi_queue_size"], G), "running_requests": (["tgi_batch_current_size"], G),
            "prompt_tokens_p99": (inp, H), "prompt_tokens_mean": (inp, H), "output_tokens_mean": (gen, H),
            "kv_cache_usage_ratio": (["tgi_batch_current_max_tokens"], G),
            "error_ratio": (["tgi_request_failure"], R),
        }
    if e == "triton":
        out = {
            "e2e_mean_seconds": (["nv_inference_request_duration_us"], H),
            "queue_time_mean_seconds": (["nv_inference_queue_duration_us"], H),
            "requests_per_second": (["nv_inference_request_success"], R),
            "output_tokens_per_second": (["nv_llm_output_token_len"], R),
            "prompt_tokens_per_second": (["nv_llm_input_token_len"], R),
            "queue_depth": (None, G), "running_requests": (None, G),
            "prompt_tokens_mean": (["nv_llm_input_token_len"], H),
            "output_tokens_mean": (["nv_llm_output_token_len"], H),
            "kv_cache_usage_ratio": (["nv_trt_llm_kv_cache_block_metrics"], G),
            "error_ratio": (["nv_inference_request_failure"], R),
            # Triton's own GPU/CPU gauges: its adapter is read before dcgm's and node's
            "host_cpu_utilization_ratio": (["nv_cpu_utilization"], G),
            "gpu_utilization_ratio": (["nv_gpu_utilization"], G),
            "gpu_memory_used_ratio": (["nv_gpu_memory_used_bytes", "nv_gpu_memory_total_bytes"], G),
            "gpu_power_ratio": (["nv_gpu_power_usage", "nv_gpu_power_limit"], G),
        }
        if cfg.get("triton_histograms"):
            fr = ["nv_inference_first_response_histogram_ms"]
            out.update({"ttft_p50_seconds": (fr, H), "ttft_p99_seconds": (fr, H), "ttft_mean_seconds": (fr, H)})
        if cfg.get("triton_summaries"):
            out.update({"e2e_p50_seconds": (["nv_inference_request_summary_us"], G),
                        "e2e_p99_seconds": (["nv_inference_request_summary_us"], G),
                        "queue_time_p99_seconds": (["nv_inference_queue_summary_us"], G)})
        return out
    if e == "trtllm_serve":
        ttft, tpot = ["trtllm_time_to_first_token_seconds"], ["trtllm_time_per_output_token_seconds"]
        e2e, q = ["trtllm_e2e_request_latency_seconds"], ["trtllm_request_queue_time_seconds"]
        return {
            "ttft_p50_seconds": (ttft, H), "ttft_p99_seconds": (ttft, H), "ttft_mean_seconds": (ttft, H),
            "itl_p50_seconds": (tpot, H), "itl_p99_seconds": (tpot, H), "itl_mean_seconds": (tpot, H),
            "e2e_p50_seconds": (e2e, H), "e2e_p99_seconds": (e2e, H), "e2e_mean_seconds": (e2e, H),
            "queue_time_p99_seconds": (q, H), "queue_time_mean_seconds": (q, H),
            "requests_per_second": (["trtllm_request_success"], R),
            "prompt_tokens_per_second": (["trtllm_prompt_tokens"], R),
            "queue_depth": (["trtllm_server_queue_length"], G),
            "running_requests": (["trtllm_num_active_requests"], G),
            "kv_cache_usage_ratio": (["trtllm_kv_cache_utilization"], G),
            "prefix_cache_hit_ratio": (["trtllm_prompt_cached_tokens", "trtllm_kv_cache_hit_rate"], R),
            "truncation_ratio": (None, R),
            "error_ratio": (["trtllm_request_error"], R),
        }
    if e == "llamacpp":
        out = {
            "itl_mean_seconds": (["llamacpp:tokens_predicted_seconds"], H),
            "prefill_time_mean_seconds": (["llamacpp:prompt_seconds"], H),
            "output_tokens_per_second": (["llamacpp:tokens_predicted"], R),
            "prompt_tokens_per_second": (["llamacpp:prompt_tokens"], R),
            "queue_depth": (["llamacpp:requests_deferred"], G),
            "running_requests": (["llamacpp:requests_processing"], G),
        }
        if cfg.get("llamacpp_kv_metrics"):
            out["kv_cache_usage_ratio"] = (["llamacpp:kv_cache_usage_ratio", "llamacpp:kv_cache_tokens"], G)
        return out
    raise ValueError(f"unknown engine {e!r} (one of {', '.join(ENGINES)})")


_ADAPTERS = {}


def adapter_signals(fname):
    if fname not in _ADAPTERS:
        with open(RULES_DIR / fname, encoding="utf-8") as fh:
            _ADAPTERS[fname] = (yaml.safe_load(fh) or {}).get("signals") or {}
    return _ADAPTERS[fname]


def const_value(e):
    """The value of an adapter expression that reads no metric (e.g. llama.cpp's
    `preemptions_per_second: {const: 0}`: the engine never preempts), else None."""
    (op, arg), = e.items()
    if op == "const":
        return float(arg)
    if op in ("sum", "max", "min", "avg", "percent_to_ratio"):
        return const_value(arg)
    if op == "scale":
        x = const_value(arg[0])
        return None if x is None else x * float(arg[1])
    if op in ("add", "sub", "div"):
        xs = [const_value(a) for a in arg]
        if any(x is None for x in xs):
            return None
        acc = xs[0]
        for x in xs[1:]:
            acc = acc + x if op == "add" else acc - x if op == "sub" else (acc / x if x else None)
            if acc is None:
                return None
        return acc
    return None


def signal_plan(sc):
    """Signal -> (kind, job) for every signal the scenario's engine, GPU and host adapters can
    compute (before nulls and omits). vLLM: SIGNAL_KIND as is. Kind "const": the adapter states
    the value itself (no metric read); the target is that value."""
    plan = {}
    eng = sc.engine
    emap = None if eng == "vllm" else engine_signals(sc.cfg)
    consts = {} if eng == "vllm" else {
        k: c for k, e in adapter_signals(ENGINES[eng][2]).items() if (c := const_value(e)) is not None}
    for sig, kind in SIGNAL_KIND.items():
        job = signal_job(sig)
        if eng == "vllm":
            plan[sig] = (kind, job)
            continue
        if sig in consts:
            plan[sig] = ("const", sc.job)
            continue
        ent = emap.get(sig)
        if ent is not None and not (job != "vllm" and (sc.job in sc.omit or all(f in sc.omit for f in ent[0] or []))):
            plan[sig] = (ent[1], sc.job)
        elif job != "vllm":
            plan[sig] = (kind, job)
    return plan


def fmt_rust(v):
    """A float as Rust's Display prints it (TGI's metrics-exporter-prometheus): shortest round-trip
    digits, never an exponent, integers without ".0"."""
    v = float(v)
    if v == int(v) and abs(v) < 1e17:
        return str(int(v))
    r = repr(v)
    return format(decimal.Decimal(r), "f") if "e" in r else r


def fmt_cpp(v):
    """prometheus-cpp's (Triton) le/quantile spelling: shortest form, integers without ".0"."""
    return fmt_rust(v)


def f32(x):
    """The value a C float holds (llama.cpp's n_busy_slots_per_decode)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def gpu_uuid(host, i):
    h = f"{zlib.crc32(f'{host}/{i}'.encode()):08x}{zlib.crc32(f'{i}/{host}'.encode()):08x}"
    h += f"{zlib.crc32(f'{host}-{i}-x'.encode()):08x}{zlib.crc32(f'x-{i}-{host}'.encode()):08x}"
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def ln_params(p50=None, p99=None, mean=None, sigma=0.8):
    """(mu, s) of a log-normal through the given targets (the fit_hist starting point)."""
    s0 = sigma
    if p50 is not None and p99 is not None:
        return math.log(p50), (math.log(p99 / p50) / Z99 if p99 > p50 else 0.05)
    if p99 is not None and mean is not None:
        d = Z99 * Z99 - 2 * math.log(p99 / mean) if p99 > mean else None
        s0 = 0.05 if d is None else (Z99 if d < 0 else Z99 - math.sqrt(d))
        s0 = max(s0, 0.05)
        return math.log(mean) - s0 * s0 / 2, s0
    if p50 is not None and mean is not None:
        s0 = math.sqrt(2 * math.log(mean / p50)) if mean > p50 * 1.0001 else 0.05
        return math.log(p50), s0
    if p50 is not None:
        return math.log(p50), s0
    if p99 is not None:
        return math.log(p99) - Z99 * s0, s0
    return math.log(mean) - s0 * s0 / 2, s0


# ----------------------------------------------------------------------------------------------
# Number formatting

def fmt_go(v):
    """A float as Go's strconv.FormatFloat(v, 'g', -1, 64), which Prometheus uses."""
    v = float(v)
    if v != v:
        return "NaN"
    if v == INF:
        return "+Inf"
    if v == -INF:
        return "-Inf"
    if v == 0:
        return "0"
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    sign, digits, exp = decimal.Decimal(repr(v)).normalize().as_tuple()
    ds = "".join(map(str, digits))
    dp = len(ds) + exp  # position of the decimal point from the first digit
    e10 = dp - 1
    s = "-" if sign else ""
    if e10 < -4 or e10 >= 6:
        m = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{s}{m}e{'-' if e10 < 0 else '+'}{abs(e10):02d}"
    if dp <= 0:
        return f"{s}0.{'0' * -dp}{ds}"
    if dp >= len(ds):
        return s + ds + "0" * (dp - len(ds))
    return f"{s}{ds[:dp]}.{ds[dp:]}"


def fmt_le_py(b):
    """A bucket bound as prometheus_client spells it (floatToGoString): 1 -> "1.0"."""
    d = float(b)
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return s


def esc(v):
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def label_text(labels):
    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in sorted(labels.items())) + "}"


# ----------------------------------------------------------------------------------------------
# Log-normal helpers and bucket-aware fitting

def ln_cdf(x, mu, s):
    if x <= 0:
        return 0.0
    return 0.5 * math.erfc(-(math.log(x) - mu) / (s * math.sqrt(2)))


def interp_quantile(q, bounds, cum):
    """Prometheus bucketQuantile over finite bounds with cumulative fractions (total 1 = +Inf)."""
    total = 1.0
    rank = q * total
    for i, (b, c) in enumerate(zip(bounds, cum)):
        if c >= rank:
            lo = bounds[i - 1] if i else 0.0
            lc = cum[i - 1] if i else 0.0
            if c - lc <= 0:
                return b
            return lo + (b - lo) * (rank - lc) / (c - lc)
    return bounds[-1]


def ln_mean(p50, p99):
    s = math.log(p99 / p50) / Z99 if p99 > p50 else 0.05
    return p50 * math.exp(s * s / 2)


_FIT_CACHE = {}


def fit_hist(bounds, p50=None, p99=None, mean=None, sigma=0.8, point=None):
    """Cumulative fractions at `bounds` and the mean for a histogram with these targets.

    Returns (fractions, mean, reachable) where reachable maps 'p50'/'p99' to the value Prometheus'
    interpolation gives for the fractions (differs from the target only when buckets forbid it).
    """
    key = (tuple(bounds), _r(p50), _r(p99), _r(mean), sigma, point)
    if key in _FIT_CACHE:
        return _FIT_CACHE[key]
    if point is not None:
        fr = [1.0 if b >= point else 0.0 for b in bounds]
        res = (fr, float(point), {})
        _FIT_CACHE[key] = res
        return res
    if p50 is not None and p99 is not None and p99 <= p50:
        raise ValueError(f"p99 ({p99}) must exceed p50 ({p50})")
    # 1. naive log-normal
    s0 = sigma
    if p50 is not None and p99 is not None:
        mu0, s0 = math.log(p50), math.log(p99 / p50) / Z99
    elif p99 is not None and mean is not None:
        d = Z99 * Z99 - 2 * math.log(p99 / mean) if p99 > mean else None
        if d is None:
            s0 = 0.05
        elif d < 0:
            s0 = Z99
        else:
            s0 = Z99 - math.sqrt(d)
        s0 = max(s0, 0.05)
        mu0 = math.log(mean) - s0 * s0 / 2
    elif p50 is not None and mean is not None:
        s0 = math.sqrt(2 * math.log(mean / p50)) if mean > p50 * 1.0001 else 0.05
        mu0 = math.log(p50)
    elif p50 is not None:
        mu0 = math.log(p50)
    elif p99 is not None:
        mu0 = math.log(p99) - Z99 * s0
    elif mean is not None:
        mu0 = math.log(mean) - s0 * s0 / 2
    else:
        raise ValueError("histogram without targets")
    if mean is None:
        mean = math.exp(mu0 + s0 * s0 / 2)

    def fr(mu, s):
        return [round(ln_cdf(b, mu, s), 12) for b in bounds]

    def q_of(q, mu, s):
        return interp_quantile(q, bounds, fr(mu, s))

    def solve_mu(q, target, s):
        lo, hi = math.log(target) - 12 * s - 3, math.log(target) + 12 * s + 3
        for _ in range(55):
            mid = (lo + hi) / 2
            if q_of(q, mid, s) < target:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    mu, s = mu0, s0
    if p50 is not None and p99 is not None:
        def err(sv):
            m = solve_mu(0.5, p50, sv)
            return q_of(0.99, m, sv) - p99, m

        grid = [s0 * 2 ** (i / 4) for i in range(-16, 9)]
        errs = [err(g) for g in grid]
        best = min(range(len(grid)), key=lambda i: (abs(errs[i][0]), abs(math.log(grid[i] / s0))))
        s, mu = grid[best], errs[best][1]
        # refine by bisection on a sign change next to the best grid point
        for i in (best - 1, best):
            if 0 <= i < len(grid) - 1 and errs[i][0] * errs[i + 1][0] < 0:
                lo, hi = grid[i], grid[i + 1]
                elo = errs[i][0]
                for _ in range(40):
                    mid = (lo + hi) / 2
                    e, m = err(mid)
                    if (e < 0) == (elo < 0):
                        lo, elo = mid, e
                    else:
                        hi = mid
                s = (lo + hi) / 2
                mu = err(s)[1]
                break
    elif p50 is not None:
        mu = solve_mu(0.5, p50, s0)
    elif p99 is not None:
        mu = solve_mu(0.99, p99, s0)
    fractions = fr(mu, s)
    reach = {}
    if p50 is not None:
        reach["p50"] = interp_quantile(0.5, bounds, fractions)
    if p99 is not None:
        reach["p99"] = interp_quantile(0.99, bounds, fractions)
    res = (fractions, mean, reach)
    _FIT_CACHE[key] = res
    return res


def _r(x):
    return None if x is None else float(f"{x:.9g}")


# ----------------------------------------------------------------------------------------------
# Target specifications

class Spec:
    """One signal's target over the recording."""

    KEYS = {"from", "to", "before", "after", "at_s", "mean", "jitter", "min", "max", "value",
            "pulse", "base", "start_s", "end_s"}

    def __init__(self, name, raw, duration):
        self.name, self.raw, self.duration = name, raw, duration
        self.amp = None  # absolute jitter amplitude; None = built-in relative noise
        self.extremes = False
        self.dynamic = False
        if isinstance(raw, bool):
            raw = float(raw)
        if isinstance(raw, str):  # YAML 1.1 reads 1.2e8 (no sign, no dot) as a string
            try:
                raw = float(raw)
            except ValueError:
                pass
        if isinstance(raw, (int, float)):
            self.kind, self.a = "const", float(raw)
        elif isinstance(raw, dict):
            unknown = set(raw) - self.KEYS
            if unknown:
                raise ValueError(f"signal {name}: unknown keys {sorted(unknown)}")
            if "jitter" in raw:
                self.amp = float(raw["jitter"])
            if "from" in raw or "to" in raw:
                self.kind, self.a, self.b = "ramp", float(raw["from"]), float(raw["to"])
                self.dynamic = self.a != self.b
            elif "before" in raw or "after" in raw:
                self.kind, self.a, self.b = "step", float(raw["before"]), float(raw["after"])
                self.at = float(raw["at_s"])
                self.dynamic = self.a != self.b
            elif "pulse" in raw:
                self.kind, self.a, self.b = "pulse", float(raw["base"]), float(raw["pulse"])
                self.start, self.end = float(raw["start_s"]), float(raw["end_s"])
                self.dynamic = True
            elif "min" in raw or "max" in raw:
                lo, hi = float(raw["min"]), float(raw["max"])
                self.kind, self.a = "const", (lo + hi) / 2
                self.amp, self.extremes = (hi - lo) / 2, True
            elif "mean" in raw or "value" in raw:
                self.kind, self.a = "const", float(raw.get("mean", raw.get("value")))
            else:
                raise ValueError(f"signal {name}: cannot read {raw!r}")
        else:
            raise ValueError(f"signal {name}: cannot read {raw!r}")

    def base(self, tau):
        if self.kind == "const":
            return self.a
        if self.kind == "ramp":
            f = min(max(tau / self.duration, 0.0), 1.0) if self.duration else 1.0
            return self.a + (self.b - self.a) * f
        if self.kind == "pulse":
            return self.b if self.start <= tau < self.end else self.a
        return self.a if tau < self.at else self.b


AUTO = {
    "ttft_mean_seconds": lambda v, t: ln_mean(v("ttft_p50_seconds", t), v("ttft_p99_seconds", t)),
    "itl_mean_seconds": lambda v, t: ln_mean(v("itl_p50_seconds", t), v("itl_p99_seconds", t)),
    "decode_time_mean_seconds": lambda v, t: v("itl_mean_seconds", t) * max(v("output_tokens_mean", t) - 1, 0.0),
    "e2e_mean_seconds": lambda v, t: v("ttft_mean_seconds", t) + v("decode_time_mean_seconds", t),
    "e2e_p50_seconds": lambda v, t: v("ttft_p50_seconds", t) + 0.75 * v("decode_time_mean_seconds", t),
    "e2e_p99_seconds": lambda v, t: v("ttft_p99_seconds", t) + 3.0 * v("decode_time_mean_seconds", t),
    "output_tokens_per_second": lambda v, t: v("requests_per_second", t) * v("output_tokens_mean", t),
    "prompt_tokens_per_second": lambda v, t: v("requests_per_second", t) * v("prompt_tokens_mean", t),
    "running_requests": lambda v, t: min(256.0, v("requests_per_second", t) * max(v("e2e_mean_seconds", t) - v("queue_time_mean_seconds", t), 0.0)),
    "iteration_tokens_mean": lambda v, t: max(1.0, (v("prompt_tokens_per_second", t) * (1 - v("prefix_cache_hit_ratio", t)) + v("output_tokens_per_second", t)) / steps_per_second(v, t)),
}


def steps_per_second(v, t):
    return max(min(1.0, v("running_requests", t)), 0.01) / v("itl_mean_seconds", t)


class Scenario:
    def __init__(self, cfg):
        self.cfg = cfg
        self.name = cfg["name"]
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.name):
            raise ValueError(f"bad scenario name {self.name!r}")
        self.duration = int(cfg["duration_s"])
        self.interval = int(cfg["interval_s"])
        self.start = int(cfg["start"])
        self.specs = {}
        self.nulls = set()
        for sig, raw in cfg["signals"].items():
            if sig not in SIGNAL_FAMILIES:
                raise ValueError(f"scenario {self.name}: unknown signal {sig!r}")
            if raw is None:
                self.nulls.add(sig)
            elif raw == "auto":
                if sig not in AUTO:
                    raise ValueError(f"scenario {self.name}: {sig} cannot be auto")
                self.specs[sig] = "auto"
            else:
                self.specs[sig] = Spec(sig, raw, self.duration)
        self.builtin = {k: (Spec(k, r, self.duration) if r not in (None, "auto") else r)
                        for k, r in BUILTIN["signals"].items()}
        self.engine = cfg.get("engine") or "vllm"
        if self.engine not in ENGINES:
            raise ValueError(f"scenario {self.name}: unknown engine {self.engine!r} (one of {', '.join(ENGINES)})")
        self.job = ENGINES[self.engine][0]
        omit = set()
        emap = engine_signals(cfg) if self.engine != "vllm" else None
        for sig in self.nulls:
            if emap is not None:
                if signal_job(sig) != "vllm":  # GPU / host families
                    omit.update(SIGNAL_FAMILIES[sig])
                if sig in emap:
                    if emap[sig][0] is None:
                        raise ValueError(f"scenario {self.name}: {sig} is derived for {self.engine} "
                                         f"and cannot be null on its own")
                    omit.update(emap[sig][0])
                continue
            fams = SIGNAL_FAMILIES[sig]
            if fams is None:
                raise ValueError(f"scenario {self.name}: {sig} cannot be null on its own "
                                 f"(set requests_per_second: null or omit vllm:request_success)")
            omit.update(fams)
        for o in cfg.get("omit") or []:
            omit.add(o)
            if o.endswith("_total"):  # a counter's sample name stands for its family
                omit.add(o[:-6])
        self.omit = omit
        self.n = self.duration // self.interval + 1
        self._cache = {}

    def rng(self, tag):
        return random.Random(zlib.crc32(f"{self.name}/{tag}".encode()))

    def emitted(self, family):
        return family not in self.omit

    def val(self, sig, tau):
        key = (sig, tau)
        c = self._cache.get(key)
        if c is not None:
            return c
        spec = self.specs.get(sig)
        if spec is None:  # null or missing: fall back to the built-in for derivations
            spec = self.builtin.get(sig)
        if spec is None:
            raise ValueError(f"signal {sig} has no value")
        r = AUTO[sig](self.val, tau) if spec == "auto" else spec.base(tau)
        self._cache[key] = r
        return r

    def spec(self, sig):
        return self.specs.get(sig)

    def amp(self, sig, tau):
        sp = self.specs.get(sig)
        if isinstance(sp, Spec) and sp.amp is not None:
            return sp.amp
        noise = float(self.cfg.get("noise", 1.0))
        if sig in ABS_NOISE:
            return ABS_NOISE[sig] * noise
        return DEFAULT_NOISE.get(sig, 0.0) * noise * abs(self.val(sig, tau))

    def dynamic(self, sig, seen=None):
        """Whether the target changes over the recording (directly or through AUTO inputs)."""
        sp = self.specs.get(sig, self.builtin.get(sig))
        if isinstance(sp, Spec):
            return sp.dynamic
        if sp == "auto":
            probe = [self.val(sig, t) for t in (0.0, self.duration / 2, float(self.duration))]
            return max(probe) - min(probe) > 1e-12 * max(1.0, abs(probe[0]))
        return False


# ----------------------------------------------------------------------------------------------
# Time grid and noise

class Grid:
    def __init__(self, sc, job):
        self.sc = sc
        offs = sc.cfg["scrape_offsets_s"]
        off = int(offs.get(job, offs.get("vllm", 0) if job == sc.job else 0))
        self.n = sc.n
        self.iv = sc.interval
        self.times = [sc.start + off + k * sc.interval for k in range(self.n)]
        self.tau = [k * sc.interval + off for k in range(self.n)]  # seconds since recording start
        in_window = sum(1 for k in range(self.n) if self.times[-1] - self.times[k] < WINDOW_S)
        self.w_samples = in_window
        self.w_intervals = max(in_window - 1, 0)

    def mid(self, k):
        """Recording time at the middle of interval k (between samples k-1 and k)."""
        return self.tau[k] - self.iv / 2


def wround(xs, ws):
    """Round a cumulative float series to integers so that the increase from sample `ws` (the
    first sample of the verification window) to the end is the rounded true increase (error
    <= 0.5 instead of <= 1). Stays monotone."""
    out = [math.floor(x + 0.5) for x in xs[:ws + 1]]
    b = out[-1] if out else 0
    x0 = xs[ws] if ws >= 0 else 0.0
    out += [b + math.floor(x - x0 + 0.5) for x in xs[ws + 1:]]
    return out


def gauge_noise(rng, n, extremes=False):
    u = [rng.uniform(-1, 1) for _ in range(n)]
    u[-1] = 0.0
    if extremes and n >= 10:
        u[n - 4], u[n - 9] = 1.0, -1.0
    return u


def rate_noise(rng, n_intervals, w, amps=None):
    """Uniform noise per interval in [-1, 1] whose amplitude-weighted sum is zero inside the last
    `w` intervals (and, separately, before them), so that sum(amps[i] * u[i]) adds nothing to
    the window's increase."""
    u = [rng.uniform(-1, 1) for _ in range(n_intervals)]
    a = amps if amps is not None else [1.0] * n_intervals
    for lo, hi in ((0, n_intervals - w), (n_intervals - w, n_intervals)):
        aa = sum(x * x for x in a[lo:hi])
        if hi - lo > 0 and aa > 0:
            proj = sum(x * y for x, y in zip(a[lo:hi], u[lo:hi])) / aa
            for i in range(lo, hi):
                u[i] -= proj * a[i]
    peak = max([abs(x) for x in u] + [1.0])
    return [x / peak for x in u]


# ----------------------------------------------------------------------------------------------
# Families

class Family:
    def __init__(self, name, typ, help_text):
        self.name, self.typ, self.help = name, typ, help_text
        self.series = []  # (sample_name, labels, times, values)
        self.hists = []   # (labels, times, bounds_le_strings, bucket_rows, counts, sums)
        self.summaries = []  # (labels, times, quantile_strings, quantile_rows, counts, sums)

    def add(self, sample_name, labels, times, values):
        self.series.append((sample_name, labels, times, values))

    def render(self, out):
        self.render_header(out)
        self.render_samples(out)

    def render_header(self, out):
        if self.help is not None:  # an exporter without a description writes no HELP line
            out.append(f"# HELP {self.name} {self.help}\n")
        out.append(f"# TYPE {self.name} {self.typ}\n")

    def render_samples(self, out):
        for labels, times, qs, rows, counts, sums in self.summaries:
            items = sorted(labels.items())
            pres = []
            for q in qs:
                lab = dict(items)
                lab["quantile"] = q
                pres.append(self.name + label_text(lab) + " ")
            lt = label_text(labels)
            cpre, spre = f"{self.name}_count{lt} ", f"{self.name}_sum{lt} "
            for k, t in enumerate(times):
                for i, p in enumerate(pres):
                    out.append(f"{p}{fmt_go(rows[k][i])} {t}\n")
                out.append(f"{cpre}{fmt_go(counts[k])} {t}\n")
                out.append(f"{spre}{fmt_go(sums[k])} {t}\n")
        for sample_name, labels, times, values in self.series:
            pre = sample_name + label_text(labels) + " "
            for t, v in zip(times, values):
                out.append(f"{pre}{fmt_go(v)} {t}\n")
        for labels, times, les, rows, counts, sums in self.hists:
            items = sorted(labels.items())
            before = ",".join(f'{k}="{esc(v)}"' for k, v in items if k < "le")
            after = ",".join(f'{k}="{esc(v)}"' for k, v in items if k > "le")
            bprefix = [f"{self.name}_bucket{{{before + ',' if before else ''}le=\"{le}\"{',' + after if after else ''}}} "
                       for le in les]
            lt = label_text(labels)
            cpre, spre = f"{self.name}_count{lt} ", f"{self.name}_sum{lt} "
            for k, t in enumerate(times):
                for i, p in enumerate(bprefix):
                    out.append(f"{p}{fmt_go(rows[k][i])} {t}\n")
                out.append(f"{cpre}{fmt_go(counts[k])} {t}\n")
                out.append(f"{spre}{fmt_go(sums[k])} {t}\n")


# ----------------------------------------------------------------------------------------------
# Family tables: an engine is a list of rows F(kind, name, help, source), one per family in the
# exporter's output order, emitted by Builder.emit through one emitter per metric kind. A source:
#   "key"            a series the engine computed (vals["key"])
#   Sig(signal, tag) the scenario signal as a noisy gauge (Builder.gauge_values, kw as there)
#   a number         a constant series
#   By(label, rows)  one series per label value: rows of (value or {labels}, source); a row
#                    whose source is None in vals is left out
#                    (rows may also name a vals entry: a list of such rows, e.g. per GPU)
#   Hist(...), Summ(...)  a histogram / summary: bucket bounds or quantiles, the counts series
#                    and the signals its p50 / p99 / mean follow
# `on` names the label set (the engine passes them by name); `when` names a flag in vals.

class F:
    def __init__(self, kind, name, help_text, src, on="lab", when=None):
        self.kind, self.name, self.help, self.src, self.on, self.when = kind, name, help_text, src, on, when


class Sig:
    def __init__(self, sig, tag, **kw):
        self.sig, self.tag, self.kw = sig, tag, kw


class By:
    def __init__(self, label, rows):
        self.label, self.rows = label, rows


class Hist:
    """bounds: bucket bounds in seconds/tokens; fmt spells them (le); labels: added to the row's;
    kw: Builder.hist's (p50, p99, mean, sigma, point, sum_scale; mean_fn(v, tau))."""
    def __init__(self, bounds, counts, p50=None, p99=None, mean=None, fmt=fmt_le_py, labels=None, les=None, **kw):
        self.bounds, self.counts, self.fmt, self.labels, self.les = bounds, counts, fmt, labels or {}, les
        self.kw = dict(p50=p50, p99=p99, mean=mean, **kw)


class Summ:
    """A rolling-window summary (Builder.summary): quantiles spelled by qfmt, noise stream tag."""
    def __init__(self, quantiles, qfmt, counts, tag, **kw):
        self.quantiles, self.qfmt, self.counts, self.tag, self.kw = quantiles, qfmt, counts, tag, kw


RUNNING = Sig("running_requests", "running", lo=0, integer=True)
WAITING = Sig("queue_depth", "waiting", lo=0, integer=True)


VLLM_FAMILIES = [  # vLLM V1 (the finished_reason split, the spec-decode and process families stay in build_vllm)
    F("counter", "vllm:request_success", "Count of successfully processed requests.",
      By("finished_reason", (("abort", "abort"), ("error", "error"), ("length", "length"), ("stop", "stop"))),
      on="base"),
    F("counter", "vllm:prompt_tokens", "Number of prefill tokens processed.", "prm_i", on="base"),
    F("counter", "vllm:generation_tokens", "Number of generation tokens processed.", "gen_i", on="base"),
    F("counter", "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", "prm_i",
      on="base"),
    F("counter", "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", "hits_i",
      on="base"),
    F("counter", "vllm:prompt_tokens_by_source", "Number of prompt tokens by source.",
      By("source", (("external_kv_transfer", 0), ("local_cache_hit", "hits_i"), ("local_compute", "compute_i"))),
      on="base", when="extras"),
    F("counter", "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).", "hits_i",
      on="base", when="extras"),
    F("counter", "vllm:num_preemptions", "Cumulative number of preemption from the engine.", "pre_i", on="base"),
    F("gauge", "vllm:num_requests_running", "Number of requests in model execution batches.", RUNNING, on="base"),
    F("gauge", "vllm:num_requests_waiting", "Number of requests waiting to be processed.", WAITING, on="base"),
    F("gauge", "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "kv", on="base"),
    F("gauge", "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", 1, on="info"),
    F("gauge", "vllm:engine_sleep_state",
      "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
      "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
      By("sleep_state", (("awake", 1), ("discard_all", 0), ("weights_offloaded", 0))), on="base", when="extras"),
    F("histogram", "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
      Hist(TTFT_BUCKETS, "fin", "ttft_p50_seconds", "ttft_p99_seconds", "ttft_mean_seconds"), on="base"),
    F("histogram", "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
      Hist(ITL_BUCKETS, "itl_cnt", "itl_p50_seconds", "itl_p99_seconds", "itl_mean_seconds"), on="base"),
    F("histogram", "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
      Hist(REQ_BUCKETS, "fin", "e2e_p50_seconds", "e2e_p99_seconds", "e2e_mean_seconds"), on="base"),
    F("histogram", "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
      Hist(REQ_BUCKETS, "fin", None, "queue_time_p99_seconds", "queue_time_mean_seconds", sigma=1.0), on="base"),
    F("histogram", "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
      Hist(REQ_BUCKETS, "fin", None, "prefill_time_p99_seconds", "prefill_time_mean_seconds"), on="base"),
    F("histogram", "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
      Hist(REQ_BUCKETS, "fin", None, None, "decode_time_mean_seconds"), on="base"),
    F("histogram", "vllm:request_prompt_tokens", "Number of prefill tokens processed.",
      Hist("tok_b", "fin", None, "prompt_tokens_p99", "prompt_tokens_mean", sigma=1.0), on="base"),
    F("histogram", "vllm:request_generation_tokens", "Number of generation tokens processed.",
      Hist("tok_b", "fin", None, None, "output_tokens_mean"), on="base"),
    F("histogram", "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
      Hist(ITER_BUCKETS, "steps_i", None, None, "iteration_tokens_mean", sigma=0.9), on="base"),
    F("histogram", "vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
      Hist(REQ_BUCKETS, "fin", mean_fn=lambda v, t: v("prefill_time_mean_seconds", t) + v("decode_time_mean_seconds", t)),
      on="base", when="extras"),
    F("histogram", "vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
      Hist(ITL_BUCKETS, "fin", mean_fn=lambda v, t: v("itl_mean_seconds", t), sigma=0.2), on="base", when="extras"),
    F("histogram", "vllm:request_prefill_kv_computed_tokens",
      "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
      Hist("tok_b", "fin", mean_fn=lambda v, t: v("prompt_tokens_mean", t) * (1 - v("prefix_cache_hit_ratio", t)),
           sigma=1.1), on="base", when="extras"),
    F("histogram", "vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.",
      Hist("tok_b", "fin", mean_fn=lambda v, t: v("output_tokens_mean", t)), on="base", when="extras"),
    F("histogram", "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
      Hist("tok_b", "fin", mean_fn=lambda v, t: 2048.0, sigma=0.3), on="base", when="extras"),
    F("histogram", "vllm:request_params_n", "Histogram of the n request parameter.",
      Hist(PARAMS_N_BUCKETS, "fin", point=1), on="base", when="extras"),
]

SGLANG_FAMILIES = [  # --enable-metrics (reference/engine-metrics.md §2)
    # -- scheduler (SchedulerMetricsCollector)
    F("gauge", "sglang:num_running_reqs", "The number of running requests.", RUNNING, on="sch"),
    F("gauge", "sglang:num_queue_reqs", "The number of requests in the waiting queue.", WAITING, on="sch"),
    F("gauge", "sglang:gen_throughput", "The generation throughput (token/s).",
      Sig("output_tokens_per_second", "genthr", lo=0.0, digits=2), on="sch"),
    F("gauge", "sglang:token_usage", "The token usage.", "kv", on="sch"),
    F("gauge", "sglang:num_used_tokens", "The number of used tokens.", "used", on="sch"),
    F("gauge", "sglang:spec_accept_length",
      "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
      "accept_len", on="sch", when="spec"),
    F("gauge", "sglang:spec_accept_rate",
      "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).", "acc", on="sch", when="spec"),
    F("counter", "sglang:num_retracted_requests", "Total number of retracted requests.", "pre_i", on="sch"),
    F("counter", "sglang:realtime_tokens",
      "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.",
      By("mode", (("decode", "gen_i"), ("prefill_cache", "hits_i"), ("prefill_compute", "compute_i"))), on="sch"),
    F("gauge", "sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", "max_total",
      on="sch"),
    F("gauge", "sglang:cache_config_info", "Information of the cache config", 1, on="info"),
    F("histogram", "sglang:queue_time_seconds", "Histogram of queueing time in seconds.",
      Hist(SGL_QUEUE_BUCKETS, "ok_i", None, "queue_time_p99_seconds", "queue_time_mean_seconds", sigma=1.0), on="sch"),
    F("histogram", "sglang:per_stage_req_latency_seconds", "The latency of each stage of requests.",
      Hist(SGL_STAGE_BUCKETS, "ok_i", None, None, "prefill_time_mean_seconds", labels={"stage": "prefill_forward"}),
      on="sch"),
    # -- tokenizer manager (TokenizerMetricsCollector)
    F("counter", "sglang:prompt_tokens", "Number of prefill tokens processed.", "prm_i", on="tok"),
    F("counter", "sglang:generation_tokens", "Number of generation tokens processed.", "gen_i", on="tok"),
    F("counter", "sglang:cached_tokens", "Number of cached prompt tokens by source (device/host/storage).",
      By("cache_source", (("device", "device_i"), ("host", "host_i"), ("total", "hits_i"))), on="tok"),
    F("counter", "sglang:num_requests", "Number of requests processed.", "ok_i", on="tok"),
    F("counter", "sglang:num_aborted_requests", "Number of requests aborted.", "ab_i", on="tok"),
    F("histogram", "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
      Hist(SGL_TTFT_BUCKETS, "ok_i", "ttft_p50_seconds", "ttft_p99_seconds", "ttft_mean_seconds"), on="tok"),
    F("histogram", "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
      Hist(SGL_ITL_BUCKETS, "itl_cnt", "itl_p50_seconds", "itl_p99_seconds", "itl_mean_seconds"), on="tok"),
    F("histogram", "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
      Hist(SGL_E2E_BUCKETS, "ok_i", "e2e_p50_seconds", "e2e_p99_seconds", "e2e_mean_seconds"), on="tok"),
    F("counter", "sglang:process_cpu_seconds", "Total user and system CPU time of the process in seconds.",
      "cpu", on="cpu"),
]

LLAMACPP_FAMILIES = [  # llama-server --metrics (reference/engine-metrics.md §5)
    F("counter", "llamacpp:prompt_tokens", "Number of prompt tokens processed.", "prm_i"),
    F("counter", "llamacpp:prompt_seconds", "Prompt process time", "prm_s"),
    F("counter", "llamacpp:tokens_predicted", "Number of generation tokens processed.", "gen_i"),
    F("counter", "llamacpp:tokens_predicted_seconds", "Predict process time", "pred_s"),
    F("counter", "llamacpp:n_decode", "Total number of llama_decode() calls", "dec_i"),
    # declared `counter` by llama-server but not named _total: `unknown` in OpenMetrics
    F("unknown", "llamacpp:n_tokens_max", "Largest observed n_tokens.", "nmax"),
    F("unknown", "llamacpp:n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", "busy"),
    F("gauge", "llamacpp:prompt_tokens_seconds", "Average prompt throughput in tokens/s.", "prm_tps"),
    F("gauge", "llamacpp:predicted_tokens_seconds", "Average generation throughput in tokens/s.", "gen_tps"),
    # 2024 builds (server.cpp) only
    F("gauge", "llamacpp:kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.", "kv", when="kv_on"),
    F("gauge", "llamacpp:kv_cache_tokens", "KV-cache tokens.", "kv_tokens", when="kv_on"),
    F("gauge", "llamacpp:requests_processing", "Number of requests processing.", RUNNING),
    F("gauge", "llamacpp:requests_deferred", "Number of requests deferred.", WAITING),
]

TRTLLM_FAMILIES = [  # trtllm-serve (reference/engine-metrics.md §4.3, the trtllm_-prefixed names)
    F("counter", "trtllm_request_success", "Count of successfully processed requests.",
      By("finished_reason", (("length", "length_i"), ("stop", "stop_i")))),
    F("histogram", "trtllm_e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
      Hist(REQ_BUCKETS, "ok_i", "e2e_p50_seconds", "e2e_p99_seconds", "e2e_mean_seconds")),
    F("histogram", "trtllm_time_to_first_token_seconds", "Histogram of time to first token in seconds.",
      Hist(TTFT_BUCKETS, "ok_i", "ttft_p50_seconds", "ttft_p99_seconds", "ttft_mean_seconds")),
    F("histogram", "trtllm_time_per_output_token_seconds", "Histogram of time per output token in seconds.",
      Hist(ITL_BUCKETS, "ok_i", "itl_p50_seconds", "itl_p99_seconds", "itl_mean_seconds")),
    F("histogram", "trtllm_request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
      Hist(REQ_BUCKETS, "ok_i", None, "queue_time_p99_seconds", "queue_time_mean_seconds", sigma=1.0)),
    F("counter", "trtllm_prompt_tokens", "Cumulative number of prompt (input) tokens processed.", "prm_i"),
    F("counter", "trtllm_prompt_cached_tokens", "Total number of prompt tokens served from KV cache.", "hits_i"),
    F("counter", "trtllm_request_error", "Total request errors, labeled by HTTP status code.",
      By("http_code", (("500", "err_i"),)), when="has_err"),
    F("gauge", "trtllm_kv_cache_hit_rate", "KV cache hit rate",
      Sig("prefix_cache_hit_ratio", "hitrate", lo=0.0, hi=1.0, digits=4)),
    F("gauge", "trtllm_kv_cache_utilization", "KV cache utilization",
      Sig("kv_cache_usage_ratio", "kv", lo=0.0, hi=1.0, digits=4)),
    F("gauge", "trtllm_server_queue_length", "Number of requests waiting in the server queue", WAITING),
    F("gauge", "trtllm_num_active_requests", "Number of active requests", RUNNING),
]


def tgi_validation_mean(v, t):  # tokenization time grows with the prompt
    return 0.0012 + 0.4e-6 * v("prompt_tokens_mean", t)


def tgi_inference_mean(v, t):
    return max(v("e2e_mean_seconds", t) - v("queue_time_mean_seconds", t) - tgi_validation_mean(v, t), 0.005)


def tgi_duration(name, help_text, **kw):
    """A TGI *_duration family: a histogram with TGI's buckets, or (tgi_summaries) a rolling
    summary whose noise stream is named after the family. Two rows, one of them on."""
    return (F("histogram", name, help_text, Hist(TGI_DURATION_BUCKETS, "ok_i", fmt=fmt_rust, **kw), when="hists"),
            F("summary", name, help_text, Summ(TGI_SUMMARY_QUANTILES, fmt_rust, "ok_i", name, **kw),
              when="summaries"))


TGI_FAMILIES = [  # text-generation-router (reference/engine-metrics.md §3)
    # counters have no _total in TGI's text: OpenMetrics needs them typed `unknown`
    F("unknown", "tgi_request_count", "Total number of requests", "count"),
    # the metrics crate creates a labelled counter on its first increment (rows left at 0 are None)
    F("unknown", "tgi_request_failure", None, By("err", (("incomplete", "inc_i"), ("validation", "val_i"))),
      when="has_fail"),
    F("unknown", "tgi_request_success", "Number of successful requests", "ok_i"),
    F("gauge", "tgi_batch_current_max_tokens", "Maximum tokens for the current batch", "kv_tokens"),
    F("gauge", "tgi_batch_current_size", "Current batch size", RUNNING),
    F("gauge", "tgi_batch_max_total_tokens", None, "mbt"),
    F("gauge", "tgi_queue_size", "Current queue size", WAITING),
    *tgi_duration("tgi_request_duration", "Request duration",
                  p50="e2e_p50_seconds", p99="e2e_p99_seconds", mean="e2e_mean_seconds"),
    F("histogram", "tgi_request_generated_tokens", "Generated tokens per request",
      Hist("gen_b", "ok_i", mean="output_tokens_mean", fmt=fmt_rust)),
    *tgi_duration("tgi_request_inference_duration", "Request inference duration", mean_fn=tgi_inference_mean),
    F("histogram", "tgi_request_input_length", "Input token length per request",
      Hist("in_b", "ok_i", None, "prompt_tokens_p99", "prompt_tokens_mean", fmt=fmt_rust, sigma=1.0)),
    *tgi_duration("tgi_request_mean_time_per_token_duration", "Mean time per token per request",
                  p50="itl_p50_seconds", p99="itl_p99_seconds", mean="itl_mean_seconds"),
    *tgi_duration("tgi_request_queue_duration", "Request queue duration",
                  p99="queue_time_p99_seconds", mean="queue_time_mean_seconds", sigma=1.0),
    *tgi_duration("tgi_request_validation_duration", "Request validation duration",
                  mean_fn=tgi_validation_mean, sigma=0.5),
]


def triton_infer_mean(v, t):  # compute_infer: the request minus its queueing, less a 3% overhead
    return max(v("e2e_mean_seconds", t) - v("queue_time_mean_seconds", t), 0.001) * 0.97


def triton_summary(name, help_text, counts, tag, **kw):
    """--metrics-config summary_latencies=true: a µs summary, integer quantiles."""
    return F("summary", name, help_text, Summ(TRITON_SUMMARY_QUANTILES, fmt_cpp, counts, tag, scale=1e6, digits=0, **kw),
             when="summaries")


TRITON_FAMILIES = [  # Triton core and the TensorRT-LLM backend (reference/engine-metrics.md §4.1-4.2)
    # Triton core: counters without _total -> `unknown` in OpenMetrics
    F("unknown", "nv_inference_request_success", "Number of successful inference requests, all batch sizes", "ok_i"),
    F("unknown", "nv_inference_request_failure", "Number of failed inference requests, all batch sizes",
      By("reason", (("BACKEND", 0), ("CANCELED", "can_i"), ("OTHER", 0), ("REJECTED", "rej_i")))),
    F("unknown", "nv_inference_count", "Number of inferences performed (does not include cached requests)", "ok_i"),
    F("unknown", "nv_inference_exec_count", "Number of model executions performed (does not include cached requests)",
      "exec_i"),
    F("unknown", "nv_inference_request_duration_us",
      "Cumulative inference request duration in microseconds (includes cached requests)", "req_us"),
    F("unknown", "nv_inference_queue_duration_us",
      "Cumulative inference queuing duration in microseconds (includes cached requests)", "queue_us"),
    F("unknown", "nv_inference_compute_input_duration_us",
      "Cumulative compute input duration in microseconds (does not include cached requests)", "in_us"),
    F("unknown", "nv_inference_compute_infer_duration_us",
      "Cumulative compute inference duration in microseconds (does not include cached requests)", "infer_us"),
    F("unknown", "nv_inference_compute_output_duration_us",
      "Cumulative inference compute output duration in microseconds (does not include cached requests)", "out_us"),
    F("gauge", "nv_inference_pending_request_count",
      "Instantaneous number of pending requests awaiting execution per-model.", "waiting"),
    # --metrics-config histogram_latencies=true
    F("histogram", "nv_inference_first_response_histogram_ms", "Duration from request to first response in milliseconds",
      Hist("fr_b", "ok_i", "ttft_p50_seconds", "ttft_p99_seconds", "ttft_mean_seconds", les="fr_les", sum_scale=1000.0),
      when="histograms"),
    triton_summary("nv_inference_request_summary_us",
                   "Summary of inference request duration in microseconds (includes cached requests)",
                   "all_i", "req_summary", p50="e2e_p50_seconds", p99="e2e_p99_seconds", mean="e2e_mean_seconds"),
    triton_summary("nv_inference_queue_summary_us",
                   "Summary of inference queuing duration in microseconds (includes cached requests)",
                   "ok_i", "queue_summary", p99="queue_time_p99_seconds", mean="queue_time_mean_seconds", sigma=1.0),
    triton_summary("nv_inference_compute_infer_summary_us",
                   "Summary of compute inference duration in microseconds (does not include cached requests)",
                   "ok_i", "infer_summary", mean_fn=triton_infer_mean),
    # TensorRT-LLM backend custom metrics (gauges from the iteration-stats JSON)
    F("gauge", "nv_trt_llm_request_metrics", "TRT LLM request metrics",
      By("request_type", (("active", "active"), ("context", "ctx"), ("max", "mbs"), ("scheduled", "active"),
                          ("waiting", "waiting")))),
    F("gauge", "nv_trt_llm_kv_cache_block_metrics", "TRT LLM KV cache block metrics",
      By("kv_cache_block_type", (("fraction", "blk_fraction"), ("free", "blk_free"), ("max", "blk_max"),
                                 ("reused", "blk_reused"), ("tokens_per", "blk_tpb"), ("used", "blk_used")))),
    F("gauge", "nv_trt_llm_inflight_batcher_metrics", "TRT LLM inflight_batcher-specific metrics",
      By("inflight_batcher_specific_metric", (("generation_requests", "gen_reqs"), ("micro_batch_id", 0),
                                              ("paused_requests", 0), ("total_context_tokens", "ctx_tokens")))),
    F("gauge", "nv_trt_llm_general_metrics", "General TRT LLM metrics",
      By("general_type", (("iteration_counter", "steps_i"), ("timestamp", "stamp")))),
    F("histogram", "nv_llm_input_token_len", "TRT LLM response metrics",
      Hist(TRITON_TOKEN_BUCKETS, "ok_i", mean="prompt_tokens_mean", sigma=1.0, fmt=fmt_cpp,
           labels={"response_metric_type": "total_input_tokens"})),
    F("histogram", "nv_llm_output_token_len", "TRT LLM response metrics",
      Hist(TRITON_TOKEN_BUCKETS, "ok_i", mean="output_tokens_mean", fmt=fmt_cpp,
           labels={"response_metric_type": "total_output_tokens"})),
    # Triton's own GPU and CPU gauges (DCGM embedded; the UUIDs match dcgm-exporter's): per-GPU rows
    F("gauge", "nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", By("gpu_uuid", "gpu_util"), on="inst"),
    F("gauge", "nv_gpu_memory_total_bytes", "GPU total memory, in bytes", By("gpu_uuid", "gpu_mem_total"), on="inst"),
    F("gauge", "nv_gpu_memory_used_bytes", "GPU used memory, in bytes", By("gpu_uuid", "gpu_mem_used"), on="inst"),
    F("gauge", "nv_gpu_power_usage", "GPU power usage in watts", By("gpu_uuid", "gpu_power"), on="inst"),
    F("gauge", "nv_gpu_power_limit", "GPU power management limit in watts", By("gpu_uuid", "gpu_plimit"), on="inst"),
    F("unknown", "nv_energy_consumption", "GPU energy consumption in joules since the Triton Server started",
      By("gpu_uuid", "gpu_energy"), on="inst"),
    F("gauge", "nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]",
      Sig("host_cpu_utilization_ratio", "trcpu", lo=0.0, hi=1.0, digits=4), on="inst"),
    F("gauge", "nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes", 2163000000000, on="inst"),
    F("gauge", "nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes", "cpu_mem_used", on="inst"),
]


class Builder:
    """Builds all families of a scenario, plus the model's own window values for --verify."""

    def __init__(self, sc):
        self.sc = sc
        self.cfg = sc.cfg
        self.families = []
        self.model = {}     # signal -> value the (unrounded) model gives over the window
        self.reach = {}     # signal -> reachable value (bucket-limited quantiles)
        self.intq = {}      # signal -> (quantile of the integer window counts, observations)
        self.known = set()  # every family name the builder knows (emitted or not)
        self.extra = dict(self.cfg.get("labels") or {})
        self.host = self.cfg["host"]
        self.absent = set()  # signals the engine would export but this recording cannot show

    def fam(self, name, typ, help_text):
        self.known.add(name)
        f = Family(name, typ, help_text)
        if self.sc.emitted(name):
            self.families.append(f)
        return f

    # -- one emitter per metric kind: a family of one series, declared and filled in one call;
    # histograms and summaries are `hist` and `summary` below. A family with several series
    # (per label value) is built with `fam` and `Family.add`.
    def gauge(self, name, help_text, labels, times, values):
        self.fam(name, "gauge", help_text).add(name, labels, times, values)

    def counter(self, name, help_text, labels, times, values):
        """An OpenMetrics counter: the family `name`, its sample `name_total`."""
        self.fam(name, "counter", help_text).add(name + "_total", labels, times, values)

    def series(self, name, typ, help_text, sample_name, labels, times, values):
        """Any other single-series family: `unknown`-typed counters, samples named otherwise."""
        self.fam(name, typ, help_text).add(sample_name, labels, times, values)

    # -- the table emitter (see F): one loop, one emitter per kind -------------------------
    def emit(self, g, rows, labels, vals):
        for r in rows:
            if r.when and not vals[r.when]:
                continue
            lab = labels[r.on]
            if r.kind == "histogram":
                self.emit_hist(g, r, lab, vals)
            elif r.kind == "summary":
                self.emit_summary(g, r, lab, vals)
            else:
                self.emit_series(g, r, lab, vals)

    def values(self, g, src, vals):
        if isinstance(src, str):
            return vals[src]
        if isinstance(src, Sig):
            return self.gauge_values(g, src.sig, src.tag, **src.kw)
        if isinstance(src, (int, float)):
            return [src] * g.n
        return src

    def emit_series(self, g, r, lab, vals):
        """gauge, counter (samples `name_total`) or unknown (counters without _total)."""
        sample = r.name + "_total" if r.kind == "counter" else r.name
        f = self.fam(r.name, r.kind, r.help)
        if isinstance(r.src, By):
            rows = vals[r.src.rows] if isinstance(r.src.rows, str) else r.src.rows
            for key, src in rows:
                values = self.values(g, src, vals)
                if values is None:  # a row the exporter has not created (yet)
                    continue
                more = key if isinstance(key, dict) else {r.src.label: key}
                f.add(sample, {**lab, **more}, g.times, values)
        else:
            f.add(sample, lab, g.times, self.values(g, r.src, vals))

    def _kw(self, kw):
        v = self.sc.val
        if kw.get("mean_fn"):
            kw = dict(kw, mean_fn=lambda t, fn=kw["mean_fn"]: fn(v, t))
        return kw

    def emit_hist(self, g, r, lab, vals):
        h = r.src
        bounds = self.values(g, h.bounds, vals)  # a list, or the name of a scenario-sized one
        les = self.values(g, h.les, vals) if h.les is not None else [h.fmt(b) for b in bounds]
        self.hist(r.name, r.help, {**lab, **h.labels}, g, bounds, les, self.values(g, h.counts, vals),
                  **self._kw(h.kw))

    def emit_summary(self, g, r, lab, vals):
        s = r.src
        self.summary(r.name, r.help, lab, g, s.quantiles, s.qfmt, self.values(g, s.counts, vals), s.tag,
                     **self._kw(s.kw))

    # -- counters --------------------------------------------------------------------------
    def counter_series(self, g, rate_fn, amp_fn, tag, start_fn=None, integer=False, decimals=None):
        """Cumulative values of a counter whose per-second rate is rate_fn(tau)."""
        sc = self.sc
        rates = [rate_fn(g.mid(k)) for k in range(1, g.n)]
        amps = [min(amp_fn(g.mid(k)) if amp_fn else 0.0, r) for k, r in zip(range(1, g.n), rates)]
        u = rate_noise(sc.rng(tag), g.n - 1, g.w_intervals, amps)
        x0 = start_fn() if start_fn else self.cfg["uptime_s"] * rate_fn(0.0)
        vals_f = [x0]
        for k in range(1, g.n):
            vals_f.append(vals_f[-1] + max(rates[k - 1] + amps[k - 1] * u[k - 1], 0.0) * g.iv)
        if integer:
            return wround(vals_f, g.n - 1 - g.w_intervals), vals_f
        if decimals is not None:
            return [round(v, decimals) for v in vals_f], vals_f
        return vals_f, vals_f

    def signal_counter(self, g, sig, tag, **kw):
        """`counter_series` of a counter whose rate is the scenario's signal `sig`, its noise
        the signal's amplitude."""
        sc = self.sc
        return self.counter_series(g, lambda t: sc.val(sig, t), lambda t: sc.amp(sig, t), tag, **kw)

    def window_rate(self, g, vals):
        w = g.w_intervals
        return (vals[-1] - vals[-1 - w]) / (w * g.iv) if w else float("nan")

    # -- gauges ----------------------------------------------------------------------------
    def gauge_values(self, g, sig, tag, scale=1.0, offset=0.0, lo=None, hi=None, integer=False,
                     digits=None, fn=None):
        sc = self.sc
        sp = sc.spec(sig)
        extremes = isinstance(sp, Spec) and sp.extremes
        u = gauge_noise(sc.rng(tag), g.n, extremes)
        out = []
        for k in range(g.n):
            tau = g.tau[k]
            base = fn(tau) if fn else sc.val(sig, tau)
            v = (base + sc.amp(sig, tau) * u[k]) * scale + offset
            if lo is not None:
                v = max(lo, v)
            if hi is not None:
                v = min(hi, v)
            if integer:
                v = math.floor(v + 0.5)
            elif digits is not None:
                v = round(v, digits)
            out.append(v)
        return out

    # -- histograms ------------------------------------------------------------------------
    def histogram(self, fam, labels, g, bounds, les, counts_int, fit_fn, init_count, signals=None,
                  sum_scale=None):
        """Adds a histogram series. counts_int = cumulative observation counts per scrape;
        fit_fn(tau) -> (fractions at bounds, mean). Bucket counts follow the expected (float)
        cumulative counts; inside the verification window the integer bucket increments are
        chosen so that Prometheus' quantiles of the window match the float model."""
        nb = len(bounds)
        n, w = g.n, g.w_intervals
        ws = n - 1 - w
        fr0, mean0 = fit_fn(0.0)[:2]
        e = [init_count * f for f in fr0]
        s = init_count * mean0
        E, sums = [], []
        win_s = 0.0
        for k in range(n):
            if k > 0:
                n_k = counts_int[k] - counts_int[k - 1]
                if n_k:
                    fr, mean = fit_fn(g.mid(k))[:2]
                    e = [x + n_k * f for x, f in zip(e, fr)]
                    s += n_k * mean
                    if k > ws:
                        win_s += n_k * mean
            E.append(e)
            sums.append(round(s, 6) if sum_scale is None else round(s * sum_scale, 6))
        rows = [[min(math.floor(x + 0.5), counts_int[k]) for x in E[k]] for k in range(ws + 1)]
        base = rows[ws]
        N = counts_int[-1] - counts_int[ws]
        exp_inc = [E[-1][i] - E[ws][i] for i in range(nb)]
        # model: the window's float distribution
        tq = []
        if N > 0:
            cum = [x / N for x in exp_inc]
            for q, sig in (signals or {}).items():
                if sig is None:
                    continue
                if q == "mean":
                    self.model[sig] = win_s / N
                else:
                    qq = 0.5 if q == "p50" else 0.99
                    m = interp_quantile(qq, bounds, cum)
                    self.model[sig] = m
                    tq.append((qq, m))
        D = optimise_increments(bounds, exp_inc, N, tq)
        for q, sig in (signals or {}).items():
            if sig is not None and q != "mean" and N > 0:
                self.intq[sig] = (prom_q_counts(0.5 if q == "p50" else 0.99, bounds, D, N), N)
        for k in range(ws + 1, n):
            nk = counts_int[k] - counts_int[ws]
            row, run = [], 0
            for i in range(nb):
                den = exp_inc[i]
                p = (E[k][i] - E[ws][i]) / den if den > 1e-12 else (nk / N if N else 0.0)
                run = max(run, math.floor(D[i] * min(max(p, 0.0), 1.0) + 0.5))
                row.append(base[i] + min(run, nk))
            rows.append(row)
        rows = [r + [counts_int[k]] for k, r in enumerate(rows)]
        fam.hists.append((labels, g.times, les + ["+Inf"], rows, list(counts_int), sums))

    # ======================================================================================
    def build(self):
        for job in (self.sc.job, "dcgm", "node"):
            if job in self.sc.omit:
                continue
            getattr(self, f"build_{job}")()
        mode = self.cfg.get("vllm_names", "current")
        if mode not in ("current", "legacy", "both"):
            raise ValueError(f"scenario {self.sc.name}: vllm_names must be current, legacy or both")
        if mode != "current":
            out = []
            for f in self.families:
                old = LEGACY_NAMES.get(f.name)
                if old is None:
                    out.append(f)
                    continue
                g = Family(old, f.typ, "DEPRECATED: " + f.help if mode == "both" else f.help)
                g.series = [(sn.replace(f.name, old, 1), lab, t, v) for sn, lab, t, v in f.series]
                g.hists = f.hists
                out += [f, g] if mode == "both" else [g]
            self.families = out
        return self.families

    # -- vLLM ------------------------------------------------------------------------------
    def build_vllm(self):
        sc, cfg = self.sc, self.cfg
        g = Grid(sc, "vllm")
        v = sc.val
        base = {"model_name": cfg["model"], "engine": "0", "job": "vllm",
                "instance": f"{self.host}:8000", **self.extra}
        proc = {"job": "vllm", "instance": f"{self.host}:8000", **self.extra}
        uptime = cfg["uptime_s"]
        extras = cfg.get("extras")

        # finished requests, split by reason (cumulative integers)
        rps = lambda t: v("requests_per_second", t)
        rps_amp = lambda t: sc.amp("requests_per_second", t)
        _, tot_f = self.counter_series(g, rps, rps_amp, "rps")
        # split using the same noisy totals
        # server errors (finished_reason "error") and client aborts ("abort") are apart:
        # only the first counts as an error
        error_f = [0.0] * g.n
        abort_f = [0.0] * g.n
        length_f = [0.0] * g.n
        error_f[0] = tot_f[0] * v("error_ratio", 0.0)
        abort_f[0] = tot_f[0] * v("abort_ratio", 0.0)
        length_f[0] = tot_f[0] * v("truncation_ratio", 0.0)
        for k in range(1, g.n):
            d = tot_f[k] - tot_f[k - 1]
            error_f[k] = error_f[k - 1] + d * v("error_ratio", g.mid(k))
            abort_f[k] = abort_f[k - 1] + d * v("abort_ratio", g.mid(k))
            length_f[k] = length_f[k - 1] + d * v("truncation_ratio", g.mid(k))
        rnd = lambda xs: wround(xs, g.n - 1 - g.w_intervals)
        error, abort, length, tot_i = rnd(error_f), rnd(abort_f), rnd(length_f), rnd(tot_f)
        stop = []
        for k in range(g.n):
            s_ = tot_i[k] - error[k] - abort[k] - length[k]
            stop.append(max(s_, stop[-1] if stop else 0))
        fin = [a + b + c + e for a, b, c, e in zip(stop, length, abort, error)]
        self.model["requests_per_second"] = self.window_rate(g, tot_f)
        self.model["error_ratio"] = (error_f[-1] - error_f[-1 - g.w_intervals]) / (tot_f[-1] - tot_f[-1 - g.w_intervals])
        self.model["abort_ratio"] = (abort_f[-1] - abort_f[-1 - g.w_intervals]) / (tot_f[-1] - tot_f[-1 - g.w_intervals])
        self.model["truncation_ratio"] = (length_f[-1] - length_f[-1 - g.w_intervals]) / (tot_f[-1] - tot_f[-1 - g.w_intervals])

        # tokens
        gen_i, gen_f = self.signal_counter(g, "output_tokens_per_second", "gen", integer=True)
        self.model["output_tokens_per_second"] = self.window_rate(g, gen_f)
        prm_i, prm_f = self.signal_counter(g, "prompt_tokens_per_second", "prompt", integer=True)
        self.model["prompt_tokens_per_second"] = self.window_rate(g, prm_f)
        hit = lambda t: v("prefix_cache_hit_ratio", t)
        hits_f = [prm_f[0] * hit(0.0)]
        for k in range(1, g.n):
            hits_f.append(hits_f[-1] + (prm_f[k] - prm_f[k - 1]) * hit(g.mid(k)))
        hits_i = rnd(hits_f)
        w = g.w_intervals
        self.model["prefix_cache_hit_ratio"] = (hits_f[-1] - hits_f[-1 - w]) / max(prm_f[-1] - prm_f[-1 - w], 1e-9)
        pre_i, pre_f = self.signal_counter(g, "preemptions_per_second", "preempt", integer=True)
        self.model["preemptions_per_second"] = self.window_rate(g, pre_f)
        blocks = int(cfg["num_gpu_blocks"])
        kv = self.gauge_values(g, "kv_cache_usage_ratio", "kv", lo=0.0, hi=1.0)
        mml = int(cfg["max_model_len"])
        info = {
            "block_size": "16", "cache_dtype": "auto", "calculate_kv_scales": "False",
            "cpu_kvcache_space_bytes": "None", "cpu_offload_gb": "0", "enable_prefix_caching": "True",
            "engine": "0", "gpu_memory_utilization": str(cfg["gpu_memory_utilization"]),
            "is_attention_free": "False",
            "kv_cache_memory_bytes": "None", "kv_offloading_backend": "native", "kv_offloading_size": "None",
            "kv_sharing_fast_prefill": "False", "mamba_cache_dtype": "auto", "mamba_page_size_padded": "None",
            "mamba_ssm_cache_dtype": "auto", "num_cpu_blocks": "None", "num_gpu_blocks": str(blocks),
            "num_gpu_blocks_override": "None", "prefix_caching_hash_algo": "sha256", "sliding_window": "None",
            "swap_space": "4", "job": "vllm", "instance": f"{self.host}:8000", **self.extra,
        }
        itl_cnt = [max(a - b, 0) for a, b in zip(gen_i, fin)]
        for k in range(1, g.n):
            itl_cnt[k] = max(itl_cnt[k], itl_cnt[k - 1])
        steps_i, _ = self.counter_series(g, lambda t: steps_per_second(v, t), None, "steps", integer=True)
        tok_b = buckets_125(mml)
        self.emit(g, VLLM_FAMILIES, {"base": base, "info": info}, {
            "abort": abort, "error": error, "length": length, "stop": stop, "fin": fin, "prm_i": prm_i,
            "gen_i": gen_i, "hits_i": hits_i, "compute_i": [a - b for a, b in zip(prm_i, hits_i)], "pre_i": pre_i,
            "kv": [math.floor(x * blocks + 0.5) / blocks for x in kv], "itl_cnt": itl_cnt, "steps_i": steps_i,
            "tok_b": tok_b, "extras": extras})

        # speculative decoding (only when a target is set)
        acc_spec = sc.spec("spec_decode_acceptance_ratio")
        if acc_spec is not None:
            k_spec = 3
            acc = lambda t: v("spec_decode_acceptance_ratio", t)
            drafts_rate = lambda t: v("output_tokens_per_second", t) / (1 + k_spec * acc(t))
            d_i, d_f = self.counter_series(g, drafts_rate, None, "drafts", integer=True)
            dt_f = [x * k_spec for x in d_f]
            acc_f = [dt_f[0] * acc(0.0)]
            for k in range(1, g.n):
                acc_f.append(acc_f[-1] + (dt_f[k] - dt_f[k - 1]) * acc(g.mid(k)))
            self.model["spec_decode_acceptance_ratio"] = (acc_f[-1] - acc_f[-1 - w]) / (dt_f[-1] - dt_f[-1 - w])
            self.counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", base, g.times, d_i)
            self.counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", base,
                         g.times, rnd(dt_f))
            f = self.fam("vllm:spec_decode_num_accepted_tokens", "counter", "Number of accepted tokens.")
            acc_i = rnd(acc_f)
            f.add("vllm:spec_decode_num_accepted_tokens_total", base, g.times, acc_i)
            f = self.fam("vllm:spec_decode_num_accepted_tokens_per_pos", "counter", "Accepted tokens per draft position.")
            weights = [0.5, 0.3, 0.2]
            parts = [rnd([x * wt for x in acc_f]) for wt in weights[:-1]]
            parts.append([a - sum(p[k] for p in parts) for k, a in enumerate(acc_i)])
            for pos, vals in enumerate(parts):
                f.add("vllm:spec_decode_num_accepted_tokens_per_pos_total", {**base, "position": str(pos)}, g.times, vals)

        # API-server process
        cpu_vals, cpu_f = self.counter_series(
            g, lambda t: v("frontend_cpu_cores", t), lambda t: sc.amp("frontend_cpu_cores", t), "proc_cpu",
            decimals=2)
        self.model["frontend_cpu_cores"] = self.window_rate(g, cpu_f)
        f = self.fam("process_cpu_seconds", "counter", "Total user and system CPU time spent in seconds.")
        f.add("process_cpu_seconds_total", proc, g.times, cpu_vals)
        # `restarts`: seconds into the recording at which the API server came back up (a crash
        # loop); its start time moves to each.
        restarts = sorted(sc.cfg.get("restarts") or [])
        start_time = sc.start - uptime + 0.37
        starts = [max([start_time] + [sc.start + r for r in restarts if t >= sc.start + r]) for t in g.times]
        if restarts and not extras:
            self.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", proc,
                       g.times, starts)
        if extras:
            for name, help_text, val in (
                ("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", starts),
                ("process_resident_memory_bytes", "Resident memory size in bytes.",
                 [6.41e9 + 1.2e6 * (k % 7) for k in range(g.n)]),
                ("process_virtual_memory_bytes", "Virtual memory size in bytes.", [1.0317e11] * g.n),
                ("process_open_fds", "Number of open file descriptors.", [143 + (k % 3) for k in range(g.n)]),
                ("process_max_fds", "Maximum number of open file descriptors.", [1048576] * g.n),
            ):
                self.gauge(name, help_text, proc, g.times, val)
            self.gauge("python_info", "Python platform information",
                       {**proc, "implementation": "CPython", "major": "3", "minor": "12",
                        "patchlevel": "11", "version": "3.12.11"},
                       g.times, [1] * g.n)
            f = self.fam("http_requests", "counter", "Total number of requests by method, status and handler.")
            scrapes0 = uptime // sc.interval
            f.add("http_requests_total", {**proc, "handler": "/health", "method": "GET", "status": "2xx"},
                  g.times, [scrapes0 // 2 + k for k in range(g.n)])
            f.add("http_requests_total", {**proc, "handler": "/metrics", "method": "GET", "status": "2xx"},
                  g.times, [scrapes0 + k for k in range(g.n)])
            f.add("http_requests_total", {**proc, "handler": "/v1/chat/completions", "method": "POST", "status": "2xx"},
                  g.times, fin)

    # ======================================================================================
    # Engine profiles beyond vLLM. Helpers shared by them:

    def hist(self, name, help_text, labels, g, bounds, les, counts, p50=None, p99=None, mean=None,
             sigma=0.8, mean_fn=None, point=None, init=None, sum_scale=None):
        """A histogram family fitted like vLLM's (see histogram()); targets are signal names."""
        fam = self.fam(name, "histogram", help_text)
        v = self.sc.val

        def fit_fn(tau):
            return fit_hist(bounds, v(p50, tau) if p50 else None, v(p99, tau) if p99 else None,
                            mean_fn(tau) if mean_fn else (v(mean, tau) if mean else None), sigma, point)
        self.histogram(fam, labels, g, bounds, les, counts, fit_fn, counts[0] if init is None else init,
                       {"p50": p50, "p99": p99, "mean": mean}, sum_scale=sum_scale)
        reach = fit_fn(g.tau[-1])[2]
        for q, sig in (("p50", p50), ("p99", p99)):
            if sig and q in reach:
                self.reach[sig] = reach[q]
        return fam

    def summary(self, name, help_text, labels, g, quantiles, qfmt, counts, tag, p50=None, p99=None,
                mean=None, mean_fn=None, sigma=0.8, scale=1.0, digits=None, init=None):
        """A rolling-window summary: each scrape's quantiles are the log-normal's through the targets
        (+-6% window noise, exact at the last scrape); _sum/_count are cumulative."""
        sc, v = self.sc, self.sc.val
        fam = self.fam(name, "summary", help_text)

        def mean_at(tau):
            if mean_fn:
                return mean_fn(tau)
            if mean:
                return v(mean, tau)
            mu, s = params(tau)
            return math.exp(mu + s * s / 2)

        def params(tau):
            return ln_params(v(p50, tau) if p50 else None, v(p99, tau) if p99 else None,
                             mean_fn(tau) if mean_fn else (v(mean, tau) if mean else None), sigma)
        nd = statistics.NormalDist()
        zs = [-3.1 if q <= 0 else 3.1 if q >= 1 else nd.inv_cdf(q) for q in quantiles]
        u = gauge_noise(sc.rng(tag), g.n)
        rows = []
        for k in range(g.n):
            tau = g.tau[k]
            mu, s = params(tau)
            row = [math.exp(mu + s * z) * (1 + 0.06 * u[k]) * scale for z in zs]
            if k == g.n - 1:  # the targets, exactly, at the last scrape
                for i, q in enumerate(quantiles):
                    if q == 0.5 and p50:
                        row[i] = v(p50, tau) * scale
                    if q == 0.99 and p99:
                        row[i] = v(p99, tau) * scale
            if digits is not None:
                row = [round(x, digits) for x in row]
            for i in range(1, len(row)):
                row[i] = max(row[i], row[i - 1])
            rows.append(row)
        sums = [(counts[0] if init is None else init) * mean_at(0.0) * scale]
        for k in range(1, g.n):
            sums.append(sums[-1] + (counts[k] - counts[k - 1]) * mean_at(g.mid(k)) * scale)
        if digits is not None:
            sums = [round(x, digits) for x in sums]
        else:
            sums = [round(x, 6) for x in sums]
        fam.summaries.append((labels, g.times, [qfmt(q) for q in quantiles], rows, list(counts), sums))
        for q, sig in ((0.5, p50), (0.99, p99)):
            if sig and q in quantiles:
                self.model[sig] = rows[-1][quantiles.index(q)] / scale
        w = g.w_intervals
        if mean and w and counts[-1] > counts[-1 - w]:
            self.model[mean] = (sums[-1] - sums[-1 - w]) / (counts[-1] - counts[-1 - w]) / scale
        return fam

    def requests_with_failures(self, g, tag="rps", signal="error_ratio"):
        """Finished requests at requests_per_second and failed ones at rps * e / (1 - e), so that
        failed / (finished + failed) = `signal` (how SGLang, TGI, Triton and trtllm-serve
        count them; SGLang's failures are aborts, abort_ratio). Returns (ok_f, bad_f, ok_i,
        bad_i): float and integer cumulative counts."""
        sc, v = self.sc, self.sc.val
        _, ok_f = self.signal_counter(g, "requests_per_second", tag)

        def odds(t):
            e = min(max(v(signal, t), 0.0), 0.95)
            return e / (1 - e)
        bad_f = [ok_f[0] * odds(0.0)]
        for k in range(1, g.n):
            bad_f.append(bad_f[-1] + (ok_f[k] - ok_f[k - 1]) * odds(g.mid(k)))
        ws = g.n - 1 - g.w_intervals
        w = g.w_intervals
        self.model["requests_per_second"] = self.window_rate(g, ok_f)
        d_ok, d_bad = ok_f[-1] - ok_f[-1 - w], bad_f[-1] - bad_f[-1 - w]
        self.model[signal] = d_bad / (d_ok + d_bad) if d_ok + d_bad > 0 else 0.0
        return ok_f, bad_f, wround(ok_f, ws), wround(bad_f, ws)

    def split_counter(self, g, total_i, total_f, share_fn):
        """Splits an integer counter in two (share_fn(tau) of its increments, and the rest); both
        parts integer and monotone, summing to total_i."""
        ws = g.n - 1 - g.w_intervals
        part_f = [total_f[0] * share_fn(0.0)]
        for k in range(1, g.n):
            part_f.append(part_f[-1] + (total_f[k] - total_f[k - 1]) * share_fn(g.mid(k)))
        part = [min(x, t) for x, t in zip(wround(part_f, ws), total_i)]
        rest = []
        for k in range(g.n):
            r = total_i[k] - part[k]
            if rest and r < rest[-1]:  # keep both monotone
                r = rest[-1]
                part[k] = total_i[k] - r
            rest.append(r)
        for k in range(1, g.n):
            part[k] = max(part[k], part[k - 1])
        return part, [t - p for t, p in zip(total_i, part)], part_f

    def cum_f(self, g, base_f, fn, start=None):
        """Cumulative float series whose increments are base_f's increments times fn(mid)."""
        out = [base_f[0] * fn(0.0) if start is None else start]
        for k in range(1, g.n):
            out.append(out[-1] + (base_f[k] - base_f[k - 1]) * fn(g.mid(k)))
        return out

    def ratio_model(self, g, num, den):
        w = g.w_intervals
        d = den[-1] - den[-1 - w]
        return (num[-1] - num[-1 - w]) / d if d > 0 else float("nan")

    def hist_sum_rates(self, g, pairs):
        """model[sig] = the window rate of the emitted histogram family's _sum (for each (sig, name))."""
        fams = {f.name: f for f in self.families}
        for sig, name in pairs:
            f = fams.get(name)
            if f and f.hists:
                self.model[sig] = self.window_rate(g, f.hists[0][5])

    # -- SGLang (--enable-metrics; reference/engine-metrics.md §2) -----------------------------
    def build_sglang(self):
        sc, cfg = self.sc, self.cfg
        g = Grid(sc, "sglang")
        v = sc.val
        ws = g.n - 1 - g.w_intervals
        inst = {"job": "sglang", "instance": f"{self.host}:30000", **self.extra}
        tok = {"model_name": cfg["model"], **inst}                      # TokenizerMetricsCollector
        sch = {"model_name": cfg["model"], "engine_type": "unified", "moe_ep_rank": "0",
               "pp_rank": "0", "tp_rank": "0", **inst}                  # SchedulerMetricsCollector
        # --mem-fraction-static 0.88 instead of vLLM's 0.9; page_size 1 (one token per page)
        max_total = int(int(cfg["num_gpu_blocks"]) * 16 * 0.88 / 0.9)

        ok_f, ab_f, ok_i, ab_i = self.requests_with_failures(g, signal="abort_ratio")
        gen_i, gen_f = self.signal_counter(g, "output_tokens_per_second", "gen", integer=True)
        prm_i, prm_f = self.signal_counter(g, "prompt_tokens_per_second", "prompt", integer=True)
        self.model["output_tokens_per_second"] = self.window_rate(g, gen_f)
        self.model["prompt_tokens_per_second"] = self.window_rate(g, prm_f)
        self.model["prompt_tokens_mean"] = self.ratio_model(g, prm_f, ok_f)
        self.model["output_tokens_mean"] = self.ratio_model(g, gen_f, ok_f)
        hits_f = self.cum_f(g, prm_f, lambda t: v("prefix_cache_hit_ratio", t))
        self.model["prefix_cache_hit_ratio"] = self.ratio_model(g, hits_f, prm_f)
        hits_i = [min(h, p) for h, p in zip(wround(hits_f, ws), prm_i)]
        compute_i = [p - h for p, h in zip(prm_i, hits_i)]
        for k in range(1, g.n):
            compute_i[k] = max(compute_i[k], compute_i[k - 1])

        spec = sc.spec("spec_decode_acceptance_ratio") is not None
        acc = self.gauge_values(g, "spec_decode_acceptance_ratio", "spec", lo=0.0, hi=1.0, digits=4) if spec else None
        kv = self.gauge_values(g, "kv_cache_usage_ratio", "kv", lo=0.0, hi=1.0)
        pre_i, pre_f = self.signal_counter(g, "preemptions_per_second", "preempt", integer=True)
        self.model["preemptions_per_second"] = self.window_rate(g, pre_f)
        # per-source hits (device, and host with HiCache) plus the `total` row the adapter reads
        host_i, device_i, _ = self.split_counter(g, hits_i, hits_f, lambda t: 0.03)
        itl_cnt = [max(a - b, 0) for a, b in zip(gen_i, ok_i)]
        for k in range(1, g.n):
            itl_cnt[k] = max(itl_cnt[k], itl_cnt[k - 1])
        # the tokenizer process's CPU (cpu_monitor.py samples psutil every 5 s)
        cpu_vals, cpu_f = self.signal_counter(g, "frontend_cpu_cores", "proc_cpu", decimals=2)
        self.model["frontend_cpu_cores"] = self.window_rate(g, cpu_f)
        self.emit(g, SGLANG_FAMILIES, {
            "sch": sch, "tok": tok, "cpu": {"component": "tokenizer", **inst},
            "info": {"num_pages": str(max_total), "page_size": "1", **inst}}, {
            "spec": spec, "acc": acc, "accept_len": spec and [round(1 + 3 * a, 4) for a in acc],
            "kv": [round(x, 2) for x in kv], "used": [math.floor(x * max_total + 0.5) for x in kv],
            "max_total": [max_total] * g.n, "pre_i": pre_i, "gen_i": gen_i, "prm_i": prm_i, "hits_i": hits_i,
            "compute_i": compute_i, "host_i": host_i, "device_i": device_i, "ok_i": ok_i, "ab_i": ab_i,
            "itl_cnt": itl_cnt, "cpu": cpu_vals})

    # -- TGI (router; reference/engine-metrics.md §3) ------------------------------------------
    def build_tgi(self):
        sc, cfg = self.sc, self.cfg
        g = Grid(sc, "tgi")
        lab = {"job": "tgi", "instance": f"{self.host}:3000", **self.extra}
        max_total = int(cfg["max_model_len"])            # --max-total-tokens (model maximum by default)
        max_input = max_total - 1                          # --max-input-tokens
        mbt = int(cfg.get("max_batch_total_tokens") or int(cfg["num_gpu_blocks"]) * 16)
        ok_f, bad_f, ok_i, bad_i = self.requests_with_failures(g)
        val_i, inc_i, _ = self.split_counter(g, bad_i, bad_f, lambda t: 0.7)
        if bad_i[-1] == 0:
            self.absent.add("error_ratio")
        kv = self.gauge_values(g, "kv_cache_usage_ratio", "kv", lo=0.0, hi=1.0)
        summaries = bool(cfg.get("tgi_summaries"))
        self.emit(g, TGI_FAMILIES, {"lab": lab}, {
            "count": [a + b for a, b in zip(ok_i, bad_i)], "ok_i": ok_i, "has_fail": bad_i[-1] > 0,
            "inc_i": inc_i if inc_i[-1] > 0 else None, "val_i": val_i if val_i[-1] > 0 else None,
            "kv_tokens": [math.floor(x * mbt + 0.5) for x in kv], "mbt": [mbt] * g.n,
            "hists": not summaries, "summaries": summaries,
            "in_b": [(max_input / 100.0) * (x + 1) for x in range(100)],
            "gen_b": [(max_total / 100.0) * (x + 1) for x in range(100)]})
        # token rates are the histograms' _sum rates: requests x mean length
        self.hist_sum_rates(g, (("output_tokens_per_second", "tgi_request_generated_tokens"),
                                ("prompt_tokens_per_second", "tgi_request_input_length")))

    # -- Triton + TensorRT-LLM backend (reference/engine-metrics.md §4.1-4.2) --------------------
    def triton_gpu_rows(self, g, ngpu, uptime):
        """Per-GPU rows (uuid, values) of Triton's embedded nv_gpu_* gauges: utilisation spread
        zero-sum over GPUs, GPU 0 the busiest; energy integrates the power."""
        v = self.sc.val
        total_b, plimit = 81559 * 1048576, 700.0
        zs = [0, 1, -1, 2, -2, 1, -1, 0][:ngpu] if ngpu > 1 else [0]
        zs = [z for z in zs] + [0] * (ngpu - len(zs))
        zs[-1] -= sum(zs)
        out = {k: [] for k in ("gpu_util", "gpu_mem_total", "gpu_mem_used", "gpu_power", "gpu_plimit", "gpu_energy")}
        for i in range(ngpu):
            uuid = gpu_uuid(self.host, i)
            low = 1.0 if i == 0 else 1.0 - 0.002 * (1 + i % 3)
            util = self.gauge_values(g, "gpu_utilization_ratio", f"trgpu{i}", offset=zs[i] * 0.01 if ngpu > 1 else 0.0,
                                     lo=0.0, hi=1.0, digits=2)
            mem = self.gauge_values(g, "gpu_memory_used_ratio", f"trmem{i}", lo=0.0, hi=0.99,
                                    fn=lambda t, low=low: v("gpu_memory_used_ratio", t) * low)
            power = self.gauge_values(g, "gpu_power_ratio", f"trpow{i}", scale=plimit * (1.0 if i == 0 else 0.985),
                                      lo=20.0, hi=plimit * 1.02, digits=3)
            energy = [round(uptime * power[0], 3)]
            for k in range(1, g.n):
                energy.append(round(energy[-1] + (power[k - 1] + power[k]) / 2 * g.iv, 3))
            for key, vals in (("gpu_util", util), ("gpu_mem_total", [total_b] * g.n),
                              ("gpu_mem_used", [math.floor(x * total_b / 1048576 + 0.5) * 1048576 for x in mem]),
                              ("gpu_power", power), ("gpu_plimit", [plimit] * g.n), ("gpu_energy", energy)):
                out[key].append((uuid, vals))
        return out

    def build_triton(self):
        sc, cfg = self.sc, self.cfg
        g = Grid(sc, "triton")
        v = sc.val
        uptime = cfg["uptime_s"]
        inst = {"job": "triton", "instance": f"{self.host}:8002", **self.extra}
        m = {"model": "tensorrt_llm", "version": "1", **inst}
        ngpu = int(cfg["gpus"])
        rng = sc.rng("triton")

        ok_f, bad_f, ok_i, bad_i = self.requests_with_failures(g)
        rej_i, can_i, _ = self.split_counter(g, bad_i, bad_f, lambda t: 0.6)
        all_f = [a + b for a, b in zip(ok_f, bad_f)]
        e2e = lambda t: v("e2e_mean_seconds", t)
        qmean = lambda t: v("queue_time_mean_seconds", t)
        req_us_f = self.cum_f(g, all_f, lambda t: e2e(t) * 1e6)
        queue_us_f = self.cum_f(g, ok_f, lambda t: qmean(t) * 1e6)
        infer_us_f = self.cum_f(g, ok_f, lambda t: max(e2e(t) - qmean(t), 0.001) * 0.97e6)
        in_us_f = self.cum_f(g, ok_f, lambda t: 180.0)
        out_us_f = self.cum_f(g, ok_f, lambda t: 95.0)
        self.model["e2e_mean_seconds"] = self.ratio_model(g, req_us_f, all_f) * 1e-6
        self.model["queue_time_mean_seconds"] = self.ratio_model(g, queue_us_f, ok_f) * 1e-6
        us = lambda xs: [math.floor(x + 0.5) for x in xs]

        waiting = self.gauge_values(g, "queue_depth", "waiting", lo=0, integer=True)
        fr_ms = [float(x) for x in (cfg.get("triton_ttft_buckets_ms") or TRITON_FIRST_RESPONSE_MS)]
        active = self.gauge_values(g, "running_requests", "running", lo=0, integer=True)
        mbs = int(cfg.get("max_batch_size") or 256)
        active = [min(a, mbs) for a in active]
        # the shared `triton` stream: context requests first, then the timestamps
        ctx = [min(a, math.floor(v("requests_per_second", t) * v("prefill_time_mean_seconds", t) * 2 * rng.random() + 0.5))
               for a, t in zip(active, g.tau)]
        stamp = [t * 1000000 - 1000 - math.floor(rng.random() * 30000) for t in g.times]
        tpb = 64
        max_blocks = int(int(cfg["num_gpu_blocks"]) * 16 / tpb)
        kv = self.gauge_values(g, "kv_cache_usage_ratio", "kv", lo=0.0, hi=1.0)
        used = [math.floor(x * max_blocks + 0.5) for x in kv]
        steps_i, _ = self.counter_series(g, lambda t: steps_per_second(v, t), None, "steps", integer=True)
        self.emit(g, TRITON_FAMILIES, {"lab": m, "inst": inst}, {
            **self.triton_gpu_rows(g, ngpu, uptime),
            "cpu_mem_used": [289000000000 + 13000000 * (k % 5) for k in range(g.n)],
            "ok_i": ok_i, "all_i": [a + b for a, b in zip(ok_i, bad_i)], "can_i": can_i, "rej_i": rej_i,
            "exec_i": [math.floor(x * 0.8) for x in ok_i], "req_us": us(req_us_f), "queue_us": us(queue_us_f),
            "in_us": us(in_us_f), "infer_us": us(infer_us_f), "out_us": us(out_us_f), "waiting": waiting,
            "histograms": cfg.get("triton_histograms"), "fr_b": [b / 1000 for b in fr_ms],
            "fr_les": [fmt_cpp(b) for b in fr_ms], "summaries": cfg.get("triton_summaries"),
            "active": active, "ctx": ctx, "mbs": [mbs] * g.n,
            "blk_fraction": [u / max_blocks for u in used], "blk_free": [max_blocks - u for u in used],
            "blk_max": [max_blocks] * g.n, "blk_reused": [math.floor(u * 0.12) for u in used],
            "blk_tpb": [tpb] * g.n, "blk_used": used, "gen_reqs": [a - c for a, c in zip(active, ctx)],
            "ctx_tokens": [math.floor(c * v("prompt_tokens_mean", t)) for c, t in zip(ctx, g.tau)],
            "steps_i": steps_i, "stamp": stamp})
        self.hist_sum_rates(g, (("output_tokens_per_second", "nv_llm_output_token_len"),
                                ("prompt_tokens_per_second", "nv_llm_input_token_len")))

    # -- trtllm-serve (reference/engine-metrics.md §4.3, the trtllm_-prefixed names) -------------
    def build_trtllm(self):
        sc, cfg = self.sc, self.cfg
        g = Grid(sc, "trtllm")
        v = sc.val
        ws = g.n - 1 - g.w_intervals
        inst = {"job": "trtllm", "instance": f"{self.host}:8000", **self.extra}
        lab = {"engine_type": "trtllm", "model_name": cfg["model"], **inst}
        ok_f, err_f, ok_i, err_i = self.requests_with_failures(g)
        length_i, stop_i, length_f = self.split_counter(g, ok_i, ok_f, lambda t: v("truncation_ratio", t))
        self.model["truncation_ratio"] = self.ratio_model(g, length_f, ok_f)
        prm_i, prm_f = self.signal_counter(g, "prompt_tokens_per_second", "prompt", integer=True)
        self.model["prompt_tokens_per_second"] = self.window_rate(g, prm_f)
        hits_f = self.cum_f(g, prm_f, lambda t: v("prefix_cache_hit_ratio", t))
        self.model["prefix_cache_hit_ratio"] = self.ratio_model(g, hits_f, prm_f)
        if err_i[-1] == 0:
            self.absent.add("error_ratio")
        self.emit(g, TRTLLM_FAMILIES, {"lab": lab}, {
            "ok_i": ok_i, "err_i": err_i, "length_i": length_i, "stop_i": stop_i, "prm_i": prm_i,
            "hits_i": [min(h, p) for h, p in zip(wround(hits_f, ws), prm_i)], "has_err": err_i[-1] > 0})

    # -- llama.cpp server (llama-server --metrics; reference/engine-metrics.md §5) ---------------
    def build_llamacpp(self):
        sc, cfg = self.sc, self.cfg
        g = Grid(sc, "llamacpp")
        v = sc.val
        lab = {"job": "llamacpp", "instance": f"{self.host}:8080", **self.extra}
        # llama-server writes `stream << double`: six significant digits ("1.23457e+06")
        g6 = lambda xs: [float(f"{x:.6g}") for x in xs]
        ms = lambda xs: [math.floor(x * 1000) / 1000 for x in xs]   # (uint64_t) ms / 1e3
        prm_i, prm_f = self.signal_counter(g, "prompt_tokens_per_second", "prompt", integer=True)
        gen_i, gen_f = self.signal_counter(g, "output_tokens_per_second", "gen", integer=True)
        dec_i, dec_f = self.counter_series(g, lambda t: steps_per_second(v, t), None, "steps", integer=True)
        pred_s_f = self.cum_f(g, gen_f, lambda t: v("itl_mean_seconds", t))
        # the adapter reads prompt seconds per llama_decode() call as the prefill time
        prm_s_f = self.cum_f(g, dec_f, lambda t: v("prefill_time_mean_seconds", t))
        busy_f = self.cum_f(g, dec_f, lambda t: max(v("running_requests", t), 0.0))
        self.model["output_tokens_per_second"] = self.window_rate(g, gen_f)
        self.model["prompt_tokens_per_second"] = self.window_rate(g, prm_f)
        self.model["itl_mean_seconds"] = self.ratio_model(g, pred_s_f, gen_f)
        self.model["prefill_time_mean_seconds"] = self.ratio_model(g, prm_s_f, dec_f)
        pred_s, prm_s = ms(pred_s_f), ms(prm_s_f)
        nmax = int(min(int(cfg["max_model_len"]), v("prompt_tokens_p99", 0.0) + 4 * v("output_tokens_mean", 0.0)))

        def per_scrape(num, den):  # the metrics "bucket" is reset by every /metrics request
            out = []
            for k in range(1, g.n):
                dn, dd = num[k] - num[k - 1], den[k] - den[k - 1]
                out.append(dn / dd if dd > 0 and dn > 0 else 0.0)
            return g6([out[0]] + out)
        kv_on = bool(cfg.get("llamacpp_kv_metrics"))
        kv = self.gauge_values(g, "kv_cache_usage_ratio", "kv", lo=0.0, hi=1.0) if kv_on else []
        self.emit(g, LLAMACPP_FAMILIES, {"lab": lab}, {
            "prm_i": g6(prm_i), "prm_s": g6(prm_s), "gen_i": g6(gen_i), "pred_s": g6(pred_s), "dec_i": g6(dec_i),
            "nmax": [nmax] * g.n,
            "busy": g6([f32(f32(math.floor(b)) / f32(max(d, 1))) for b, d in zip(busy_f, dec_i)]),
            "prm_tps": per_scrape(prm_i, prm_s), "gen_tps": per_scrape(gen_i, pred_s),
            "kv_on": kv_on, "kv": g6(kv), "kv_tokens": [math.floor(x * int(cfg["max_model_len"]) + 0.5) for x in kv]})

    # -- dcgm-exporter ---------------------------------------------------------------------
    def build_dcgm(self):
        sc, cfg = self.sc, self.cfg
        g = Grid(sc, "dcgm")
        v = sc.val
        ngpu = int(cfg["gpus"])
        total_mib, reserved_mib = 81559, 511
        max_sm, mem_clock, plimit = 1980, 2619, 700.0
        bus = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
               "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"]
        gl = []
        for i in range(ngpu):
            uuid = gpu_uuid(self.host, i)
            gl.append({"gpu": str(i), "UUID": uuid, "pci_bus_id": bus[i] if i < len(bus) else f"00000000:{0xE0 + i:02X}:00.0",
                       "device": f"nvidia{i}", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": self.host,
                       "DCGM_FI_DRIVER_VERSION": "570.133.20", "job": "dcgm", "instance": f"{self.host}:9400",
                       **self.extra})
        extras = cfg.get("extras")

        def zero_sum(i, step):
            """Per-GPU offset for 'avg' signals: zero-sum over GPUs."""
            if ngpu == 1:
                return 0.0
            pat = [0, 1, -1, 2, -2, 1, -1, 0]
            offs = [pat[j % len(pat)] for j in range(ngpu)]
            offs[-1] -= sum(offs)
            return offs[i] * step

        def lower(i, frac):
            """Per-GPU factor for 'max' signals: GPU 0 holds the target, others are lower."""
            return 1.0 if i == 0 else 1.0 - frac * (1 + (i % 3))

        fams = {}

        def fam(name, typ, help_text):
            if name not in fams:
                fams[name] = self.fam(name, typ, help_text)
            return fams[name]

        # keep the family order of dcgm-exporter's output (default-counters.csv order, added fields last)
        order = [
            ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
            ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
            ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
            ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
            ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
            ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
            ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
            ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
            ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
            ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
            ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
            ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
            ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
            ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
            ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
            ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes."),
            ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
            ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
            ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
            ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
            ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
            ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active sending or receiving data."),
            ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second."),
            ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second."),
            ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*)."),
            ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gauge", "Effective power limit that the driver enforces after taking into account all limiters (in W)."),
            ("DCGM_FI_DEV_MAX_SM_CLOCK", "gauge", "Maximum supported SM clock for the device (in MHz)."),
            ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
        ]
        extra_only = {"DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
                      "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"}
        for name, typ, help_text in order:
            if name in extra_only and not extras:
                continue
            fam(name, typ, help_text)

        def put(name, labels, vals):
            if name in fams:
                fams[name].add(name, labels, g.times, vals)

        host_uptime = 1036800 + zlib.crc32(self.host.encode()) % 86400
        w = g.w_intervals
        util_model, pcie_model, nvl_model = [], [], []
        for i, lab in enumerate(gl):
            tg = f"gpu{i}"
            util = self.gauge_values(g, "gpu_utilization_ratio", tg + "util", scale=100,
                                     offset=zero_sum(i, 1.0), lo=0, hi=100, integer=True)
            put("DCGM_FI_DEV_GPU_UTIL", lab, util)
            for sig, fname in (("sm_active_ratio", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
                               ("tensor_active_ratio", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
                               ("dram_active_ratio", "DCGM_FI_PROF_DRAM_ACTIVE")):
                put(fname, lab, self.gauge_values(g, sig, tg + sig, offset=zero_sum(i, 0.01), lo=0.0, hi=1.0, digits=6))
            if extras:
                put("DCGM_FI_DEV_MEM_COPY_UTIL", lab,
                    self.gauge_values(g, "dram_active_ratio", tg + "memcopy", scale=80, lo=0, hi=100, integer=True))
                put("DCGM_FI_DEV_ENC_UTIL", lab, [0] * g.n)
                put("DCGM_FI_DEV_DEC_UTIL", lab, [0] * g.n)
                put("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", lab, [0] * g.n)
                put("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", lab, [0] * g.n)
            # memory (vLLM preallocates: constant unless the target moves)
            used = [math.floor(x * total_mib + 0.5) for x in
                    self.gauge_values(g, "gpu_memory_used_ratio", tg + "fb", lo=0.0, hi=(total_mib - reserved_mib) / total_mib,
                                      fn=lambda t, i=i: v("gpu_memory_used_ratio", t) * lower(i, 0.002))]
            put("DCGM_FI_DEV_FB_USED", lab, used)
            put("DCGM_FI_DEV_FB_FREE", lab, [total_mib - reserved_mib - u for u in used])
            put("DCGM_FI_DEV_FB_RESERVED", lab, [reserved_mib] * g.n)
            temp = self.gauge_values(g, "gpu_temperature_celsius", tg + "temp", offset=-(i % 3) if i else 0, integer=True)
            put("DCGM_FI_DEV_GPU_TEMP", lab, temp)
            put("DCGM_FI_DEV_MEMORY_TEMP", lab, [t + 6 for t in temp])
            power = self.gauge_values(g, "gpu_power_ratio", tg + "power", scale=plimit * lower(i, 0.015), lo=20.0,
                                      hi=plimit * 1.02, digits=3)
            put("DCGM_FI_DEV_POWER_USAGE", lab, power)
            put("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", lab, [plimit] * g.n)
            energy = [math.floor(host_uptime * power[0] * 1000)]
            for k in range(1, g.n):
                energy.append(energy[-1] + math.floor((power[k - 1] + power[k]) / 2 * g.iv * 1000 + 0.5))
            put("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", lab, energy)
            clk = self.gauge_values(g, "sm_clock_ratio", tg + "clk", scale=max_sm, offset=(15 * (i % 3) if i else 0),
                                    lo=210, hi=max_sm, integer=True)
            put("DCGM_FI_DEV_SM_CLOCK", lab, clk)
            put("DCGM_FI_DEV_MAX_SM_CLOCK", lab, [max_sm] * g.n)
            put("DCGM_FI_DEV_MEM_CLOCK", lab, [mem_clock] * g.n)
            # clock-event reasons: power cap 0x4 / sw thermal 0x20 in the target share of scrapes
            share = 1.0 if i == 0 else 0.5
            pw = bit_pattern(g, lambda t: v("gpu_power_throttle_ratio", t) * share)
            th = bit_pattern(g, lambda t: v("gpu_thermal_throttle_ratio", t) * share)
            idle = bit_pattern(g, lambda t: max(0.0, 1.0 - 4 * v("gpu_utilization_ratio", t)))
            put("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", lab,
                [(0x4 if a else 0) | (0x20 if b else 0) | (0x1 if c else 0) for a, b, c in zip(pw, th, idle)])
            put("DCGM_FI_DEV_XID_ERRORS", lab,
                [int(round(v("gpu_xid_error_code", t))) if i == 0 else 0 for t in g.tau])
            put("DCGM_FI_DEV_ROW_REMAP_FAILURE", lab,
                [int(round(v("gpu_row_remap_failure", t))) if i == 0 else 0 for t in g.tau])
            ecc = [0] * g.n
            if i == 0:
                nerr = int(round(v("gpu_ecc_uncorrectable_errors", g.tau[-1])))
                if nerr > 0:
                    at = max(g.n - 8, g.n - g.w_samples + 1, 1)
                    for k in range(at, g.n):
                        ecc[k] = nerr
            put("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", lab, ecc)
            # PCIe throughput gauges (bytes/s), 40% TX / 60% RX
            pcie = self.gauge_values(g, "pcie_bytes_per_second", tg + "pcie", scale=lower(i, 0.1), lo=0.0)
            put("DCGM_FI_PROF_PCIE_TX_BYTES", lab, [math.floor(x * 0.4 + 0.5) for x in pcie])
            put("DCGM_FI_PROF_PCIE_RX_BYTES", lab, [math.floor(x + 0.5) - math.floor(x * 0.4 + 0.5) for x in pcie])
            rep_i, rep_f = self.signal_counter(g, "pcie_replays_per_second", tg + "replay",
                                               integer=True, start_fn=lambda: 0.0)
            put("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", lab, rep_i if i == 0 else [0] * g.n)
            if i == 0:
                self.model["pcie_replays_per_second"] = self.window_rate(g, rep_f)
            nv_i, nv_f = self.counter_series(g, lambda t, i=i: v("nvlink_bytes_per_second", t) * lower(i, 0.05),
                                             lambda t: sc.amp("nvlink_bytes_per_second", t) * 0.5, tg + "nvlink",
                                             integer=True, start_fn=lambda: host_uptime * v("nvlink_bytes_per_second", 0.0) * 0.8)
            put("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", lab, nv_i)
            nvl_model.append(self.window_rate(g, nv_f))
        self.model["nvlink_bytes_per_second"] = max(nvl_model)

    # -- node_exporter ---------------------------------------------------------------------
    def build_node(self):
        sc, cfg = self.sc, self.cfg
        g = Grid(sc, "node")
        v = sc.val
        ncpu = int(cfg["cpus"])
        lab = {"job": "node", "instance": f"{self.host}:9100", **self.extra}
        host_uptime = 1036800 + zlib.crc32(self.host.encode()) % 86400
        pegged = 1 if ncpu > 1 else 0
        modes = ("idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user")
        split = {"user": 0.78, "system": 0.17, "softirq": 0.03, "irq": 0.01, "nice": 0.01, "steal": 0.0}
        # zero-sum spread over the non-pegged cores
        others = [c for c in range(ncpu) if c != pegged]
        spread = [((c * 7919) % 13) / 6.0 - 1.0 for c in others]
        if spread:
            m = sum(spread) / len(spread)
            spread = [s - m for s in spread]
            pk = max([abs(s) for s in spread] + [1e-9])
            spread = [s / pk for s in spread]
        spread_of = dict(zip(others, spread))

        def busy(c, t):
            u, b = v("host_cpu_utilization_ratio", t), v("host_cpu_busiest_core_ratio", t)
            if ncpu == 1:
                return u
            o = max(0.0, min((ncpu * u - b) / (ncpu - 1), b))
            if c == pegged:
                return b
            a = min(0.35 * o, (b - o) * 0.9, 1 - o)
            return o + a * spread_of[c]

        def avg_busy(t):
            return sum(busy(c, t) for c in range(ncpu)) / ncpu

        fam = self.fam("node_cpu_seconds", "counter", "Seconds the CPUs spent in each mode.")
        idle_model = []
        iow_model = []
        rng = sc.rng("cpu")
        def jitter(c, t):
            b = busy(c, t)
            rel = sc.amp("host_cpu_utilization_ratio", t) / max(v("host_cpu_utilization_ratio", t), 1e-9)
            return min(rel * b, 1 - b, b * 0.5)

        for c in range(ncpu):
            u_noise = rate_noise(rng, g.n - 1, g.w_intervals, [jitter(c, g.mid(k)) for k in range(1, g.n)])
            per_mode = {m: [host_uptime * 0.0] for m in modes}
            # starting values: the host has been up for ~12 days at roughly the same load
            b0 = busy(c, 0.0)
            w0 = min(v("host_cpu_iowait_ratio", 0.0), avg_busy(0.0)) * b0 / max(avg_busy(0.0), 1e-9)
            per_mode["idle"][0] = host_uptime * (1 - b0)
            per_mode["iowait"][0] = host_uptime * w0
            for m, s in split.items():
                per_mode[m][0] = host_uptime * (b0 - w0) * s
            for k in range(1, g.n):
                t = g.mid(k)
                b = busy(c, t)
                bk = b + jitter(c, t) * u_noise[k - 1]
                # iowait counts as busy (1 - idle): give each core a share proportional to its
                # busy time, so the average is the target and no core has more iowait than busy
                wk = min(v("host_cpu_iowait_ratio", t), avg_busy(t)) * bk / max(avg_busy(t), 1e-9)
                per_mode["idle"].append(per_mode["idle"][-1] + (1 - bk) * g.iv)
                per_mode["iowait"].append(per_mode["iowait"][-1] + wk * g.iv)
                for m, s in split.items():
                    per_mode[m].append(per_mode[m][-1] + (bk - wk) * s * g.iv)
            w = g.w_intervals
            idle_model.append((per_mode["idle"][-1] - per_mode["idle"][-1 - w]) / (w * g.iv))
            iow_model.append((per_mode["iowait"][-1] - per_mode["iowait"][-1 - w]) / (w * g.iv))
            for m in modes:
                fam.add("node_cpu_seconds_total", {**lab, "cpu": str(c), "mode": m}, g.times,
                        [round(x, 2) for x in per_mode[m]])
        self.model["host_cpu_utilization_ratio"] = 1 - sum(idle_model) / ncpu
        self.model["host_cpu_busiest_core_ratio"] = 1 - min(idle_model)
        self.model["host_cpu_iowait_ratio"] = sum(iow_model) / ncpu
        # PSI counters are microseconds in /proc, exported as seconds: 6 decimals
        psi_vals, psi_f = self.signal_counter(g, "host_cpu_pressure_ratio", "psi",
                                              start_fn=lambda: host_uptime * v("host_cpu_pressure_ratio", 0.0),
                                              decimals=6)
        self.model["host_cpu_pressure_ratio"] = self.window_rate(g, psi_f)
        f = self.fam("node_pressure_cpu_waiting_seconds", "counter", "Total time in seconds that processes have waited for CPU time")
        f.add("node_pressure_cpu_waiting_seconds_total", lab, g.times, psi_vals)
        if cfg.get("extras"):
            u = v("host_cpu_utilization_ratio", g.tau[-1]) * ncpu
            for name, mult in (("node_load1", 1.0), ("node_load5", 0.97), ("node_load15", 0.95)):
                self.gauge(name, f"{name[5:]}m load average.", lab, g.times,
                           [round(u * mult * (1 + 0.05 * math.sin(k / 3)), 2) for k in range(g.n)])
            f = self.fam("node_boot_time_seconds", "gauge", "Node boot time, in unixtime.")
            f.add("node_boot_time_seconds", lab, g.times, [sc.start - host_uptime] * g.n)
            for name, val in (("node_memory_MemTotal_bytes", 2.163e12), ("node_memory_MemAvailable_bytes", 1.874e12)):
                self.gauge(name, f"Memory information field {name[12:]}.", lab, g.times,
                           [val - (0 if "Total" in name else 1.3e7 * (k % 5)) for k in range(g.n)])


def prom_q_counts(q, bounds, D, N):
    """histogram_quantile over finite cumulative counts D (and +Inf = N)."""
    rank = q * N
    for i, c in enumerate(D):
        if c >= rank:
            lo = bounds[i - 1] if i else 0.0
            lc = D[i - 1] if i else 0
            return b_interp(lo, bounds[i], rank - lc, c - lc)
    return bounds[-1]


def b_interp(lo, hi, r, c):
    return hi if c <= 0 else lo + (hi - lo) * r / c


def optimise_increments(bounds, exp_inc, N, tq):
    """Integer cumulative window increments per bucket (monotone, <= N) close to exp_inc whose
    interpolated quantiles match the targets tq [(q, value)]: rounding, then a greedy search
    moving single observations between neighbouring buckets."""
    nb = len(bounds)
    D = []
    for x in exp_inc:
        D.append(min(max(math.floor(x + 0.5), D[-1] if D else 0), N))
    if not tq or N <= 0:
        return D

    def cost(D):
        return sum(abs(prom_q_counts(q, bounds, D, N) - m) / m for q, m in tq if m > 0)

    cur = cost(D)
    for _ in range(400):
        if cur < 5e-4:
            break
        best = None
        for i in range(nb):
            lo = D[i - 1] if i else 0
            hi = D[i + 1] if i < nb - 1 else N
            for d in (-1, 1):
                v = D[i] + d
                if lo <= v <= hi:
                    D[i] = v
                    c = cost(D)
                    D[i] = v - d
                    if c < cur - 1e-12 and (best is None or c < best[0]):
                        best = (c, i, d)
        if best is None:
            break
        cur, i, d = best
        D[i] += d
    return D


def bit_pattern(g, share_fn):
    """Which scrapes have a bit set so that the last k scrapes hold round(sum of shares) hits."""
    bits = [False] * g.n
    acc = 0.0
    prev = 0
    for j in range(g.n):
        k = g.n - 1 - j
        acc += min(max(share_fn(g.tau[k]), 0.0), 1.0)
        cnt = math.floor(acc + 0.5)
        bits[k] = cnt > prev
        prev = cnt
    return bits


# ----------------------------------------------------------------------------------------------
# Scenario loading and writing

def merge(base, over):
    out = dict(base)
    for k, val in (over or {}).items():
        if k in ("signals", "labels", "scrape_offsets_s") and isinstance(val, dict):
            out[k] = {**(out.get(k) or {}), **val}
        elif k == "omit":
            out[k] = list(out.get(k) or []) + list(val or [])
        else:
            out[k] = val
    return out


def load_scenarios(path=SCENARIOS_FILE):
    with open(path, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh) or {}
    unknown = set(doc) - {"defaults", "scenarios"}
    if unknown:
        raise ValueError(f"{path}: unknown top-level keys {sorted(unknown)}")
    defaults = merge(BUILTIN, doc.get("defaults") or {})
    out = []
    names = set()
    for s in doc.get("scenarios") or []:
        cfg = merge(defaults, {k: x for k, x in s.items() if k != "description"})
        if cfg["name"] in names:
            raise ValueError(f"duplicate scenario {cfg['name']}")
        names.add(cfg["name"])
        out.append(cfg)
    byname = {c["name"]: c for c in out}
    for c in out:
        if c.get("fleet"):
            c["fleet"] = resolve_fleet(c, byname)
    return out


KNOWN_KEYS = set(BUILTIN) | {"name"}
FLEET_MEMBER_KEYS = {"scenario", "host", "pod"}


def resolve_fleet(cfg, byname):
    """Fleet members as {scenario, host, pod, cfg}: the named scenario with its own host (instance,
    dcgm Hostname) and an optional `pod` label on all of its series; any other member key (a
    scenario key such as `signals` or `labels`) is merged over the scenario."""
    members = []
    for i, m in enumerate(cfg["fleet"]):
        if isinstance(m, dict) and "cfg" in m:  # already resolved
            members.append(m)
            continue
        if not isinstance(m, dict) or "scenario" not in m:
            raise ValueError(f"fleet {cfg['name']}: member {i} needs `scenario`")
        base = byname.get(m["scenario"])
        if base is None:
            raise ValueError(f"fleet {cfg['name']}: no scenario {m['scenario']!r}")
        if base.get("fleet"):
            raise ValueError(f"fleet {cfg['name']}: member {m['scenario']!r} is itself a fleet")
        over = {k: x for k, x in m.items() if k not in FLEET_MEMBER_KEYS}
        unknown = set(over) - KNOWN_KEYS
        if unknown:
            raise ValueError(f"fleet {cfg['name']}: member {i}: unknown keys {sorted(unknown)}")
        mc = merge(base, over)
        # its own name: own noise (a fleet of identical scenarios does not move in lockstep)
        mc["name"] = f"{cfg['name']}.{i}.{m['scenario']}"
        mc["host"] = m.get("host", base["host"])
        if m.get("pod"):
            mc["labels"] = {**(mc.get("labels") or {}), "pod": str(m["pod"])}
        members.append({"scenario": m["scenario"], "host": mc["host"], "pod": m.get("pod"), "cfg": mc})
    hosts = [(x["host"], x["pod"]) for x in members]
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"fleet {cfg['name']}: two members share host and pod")
    return members


def render_members(cfgs, keep=True):
    """Several replicas merged into one OpenMetrics text (as chunks): each family's HELP/TYPE once,
    then every member's series of it in member order (each series in time order)."""
    order, heads, blocks, built = [], {}, {}, []
    for mc in cfgs:
        unknown = set(mc) - KNOWN_KEYS
        if unknown:
            raise ValueError(f"scenario {mc.get('name')}: unknown keys {sorted(unknown)}")
        sc = Scenario(mc)
        b = Builder(sc)
        for f in b.build():
            if not (f.series or f.hists or f.summaries):
                continue
            if f.name not in heads:
                h = []
                f.render_header(h)
                heads[f.name] = "".join(h)
                order.append(f.name)
                blocks[f.name] = []
            o = []
            f.render_samples(o)
            blocks[f.name].append("".join(o))
        if keep:
            built.append((sc, b))
        del b
    chunks = []
    for name in order:
        chunks.append(heads[name])
        chunks.extend(blocks.pop(name))
    chunks.append("# EOF\n")
    return chunks, built


def render(cfg):
    unknown = set(cfg) - KNOWN_KEYS
    if unknown:
        raise ValueError(f"scenario {cfg.get('name')}: unknown keys {sorted(unknown)}")
    if cfg.get("fleet"):
        chunks, built = render_members([m["cfg"] for m in cfg["fleet"]])
        return "".join(chunks), None, built
    sc = Scenario(cfg)
    b = Builder(sc)
    fams = b.build()
    out = []
    for f in fams:
        if f.series or f.hists or f.summaries:
            f.render(out)
    out.append("# EOF\n")
    return "".join(out), sc, b


def unreachable(sc, b):
    """Warnings for quantile targets the bucket layout cannot represent, and unknown omits."""
    out = []
    for o in sorted(sc.cfg.get("omit") or []):
        if o not in JOBS and o != sc.job and o not in b.known and o[:-6] not in b.known and not o.startswith("vllm:spec_decode"):
            out.append(f"warning: {sc.name}: omit entry {o!r} matches no family")
    plan = signal_plan(sc)
    for sig, r in sorted(b.reach.items()):
        if sig not in plan:
            continue
        t = sc.val(sig, float(sc.duration))
        if abs(r - t) > 0.02 * abs(t):
            out.append(f"warning: {sc.name}: {sig} = {t:g} cannot be represented with {ENGINES[sc.engine][3]}'s bucket "
                       f"bounds together with the histogram's other targets; the recording reads ~{r:.4g}")
    return out


def write(cfg, directory, warn=False):
    text, sc, b = render(cfg)
    if warn:
        for msc, mb in (b if sc is None else [(sc, b)]):
            for line in unreachable(msc, mb):
                print(line, file=sys.stderr)
    # Compressed (mtime 0, so the bytes depend only on the text): recordings are ~15x smaller.
    path = Path(directory) / f"{cfg['name']}.om.gz"
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        fh.write(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    os.replace(tmp, path)
    return path, len(text)


def bench_cfg():
    return merge(BUILTIN, BENCH)


# --fleet-bench: N single-GPU vLLM replicas, healthy and busy with some spread, one in twenty
# faulty (cycling through these), from the built-in defaults only (scenarios.yaml does not
# change it).
FLEET_FAULTS = [
    ("kv_cache_exhaustion", {"requests_per_second": 3, "kv_cache_usage_ratio": {"mean": 0.995, "jitter": 0.004},
                             "preemptions_per_second": 0.3, "queue_depth": {"from": 5, "to": 150},
                             "running_requests": {"mean": 48, "jitter": 4}, "ttft_p50_seconds": 12,
                             "ttft_p99_seconds": 35, "queue_time_mean_seconds": 10, "queue_time_p99_seconds": 30,
                             "gpu_utilization_ratio": 0.96}),
    ("gpu_throttling", {"gpu_thermal_throttle_ratio": 0.6, "gpu_temperature_celsius": 89, "sm_clock_ratio": 0.7,
                        "gpu_utilization_ratio": 0.9, "itl_p50_seconds": 0.05, "itl_p99_seconds": 0.15}),
    ("small_batch_limit", {"requests_per_second": 1.5, "running_requests": 16, "queue_depth": {"mean": 20, "jitter": 3},
                           "kv_cache_usage_ratio": 0.3, "ttft_p50_seconds": 4, "ttft_p99_seconds": 10,
                           "queue_time_mean_seconds": 4, "queue_time_p99_seconds": 9, "gpu_utilization_ratio": 0.45}),
    ("gpu_fault", {"gpu_xid_error_code": 79, "error_ratio": 0.05}),
]


def write_fleet_stream(cfgs, path, level=6):
    """A fleet recording written through gzip without holding it: each member is built alone,
    each family's block of it compressed into that family's spool file (a run of gzip members),
    then the spools are joined in family order. The result is one multi-member gzip file with
    the same text, family by family, as ``render_members`` gives (a day of 64 replicas is ~16 GB
    of text, more than memory). Returns (text bytes, lines)."""
    order, heads, spools = [], {}, {}
    size = lines = 0
    with tempfile.TemporaryDirectory(dir=Path(path).parent) as tmp:
        for mc in cfgs:
            b = Builder(Scenario(mc))
            for f in b.build():
                if not (f.series or f.hists or f.summaries):
                    continue
                if f.name not in heads:
                    h = []
                    f.render_header(h)
                    heads[f.name] = "".join(h)
                    order.append(f.name)
                    spools[f.name] = Path(tmp) / f"{len(order)}.gz"
                o = []
                f.render_samples(o)
                text = "".join(o).encode("utf-8")
                del o
                size += len(text)
                lines += text.count(b"\n")
                with open(spools[f.name], "ab") as fh:
                    fh.write(gzip.compress(text, compresslevel=level, mtime=0))
            del b
            print(f"  {mc['name']}: {size:,} bytes of text so far", file=sys.stderr, flush=True)
        tmp_out = Path(str(path) + ".tmp")
        with open(tmp_out, "wb") as out:
            for name in order:
                head = heads[name].encode("utf-8")
                size += len(head)
                lines += head.count(b"\n")
                out.write(gzip.compress(head, compresslevel=level, mtime=0))
                with open(spools[name], "rb") as fh:
                    while True:
                        buf = fh.read(1 << 24)
                        if not buf:
                            break
                        out.write(buf)
            out.write(gzip.compress(b"# EOF\n", compresslevel=level, mtime=0))
        os.replace(tmp_out, path)
    return size + len("# EOF\n"), lines + 1


# --incidents: instead of one replica in twenty faulty all along, three replicas faulty once each,
# for an hour (an eighth of the recording when shorter), at different times, with different
# causes: what a fleet postmortem must find, and when.
FLEET_INCIDENTS = [(0.2, "kv_cache_exhaustion"), (0.5, "small_batch_limit"), (0.75, "gpu_fault")]


def incident_replicas(n):
    """The replicas --incidents makes faulty, in FLEET_INCIDENTS order."""
    return [max(1, n // 7), n // 2, max(2, n - 3)][:len(FLEET_INCIDENTS)]


def as_pulse(value, start_s, end_s, base):
    """A fault's target (a number, a mean with jitter, a ramp's end) as a pulse over a base."""
    if isinstance(value, dict):
        value = value.get("mean", value.get("to", value.get("value")))
    return {"base": base, "pulse": float(value), "start_s": start_s, "end_s": end_s}


def fleet_bench_cfgs(n, hours=None, step=None, incidents=False):
    duration = int(round((hours if hours is not None else 1 / 6) * 3600))
    faulty = dict(zip(incident_replicas(n), FLEET_INCIDENTS)) if incidents else {}
    out = []
    for i in range(n):
        r1 = zlib.crc32(f"fleet-bench/{i}/a".encode()) / 2 ** 32
        r2 = zlib.crc32(f"fleet-bench/{i}/b".encode()) / 2 ** 32
        sig = {"requests_per_second": round(2.5 + 3.0 * r1, 2), "gpu_utilization_ratio": round(0.55 + 0.3 * r1, 2),
               "kv_cache_usage_ratio": round(0.3 + 0.4 * r2, 2), "prefix_cache_hit_ratio": round(0.15 + 0.3 * r2, 2),
               "host_cpu_utilization_ratio": round(0.12 + 0.1 * r2, 3)}
        kind = "healthy"
        if incidents and i in faulty:
            at, kind = faulty[i]
            fault = dict(FLEET_FAULTS)[kind]
            length = min(3600, duration // 8)
            start = int(at * duration)
            healthy = merge(BUILTIN, {"signals": sig})["signals"]
            for k, v in fault.items():
                base = healthy.get(k, 0.0)
                if isinstance(base, dict):
                    base = base.get("mean", base.get("value", 0.0))
                sig[k] = as_pulse(v, start, start + length, float(base) if isinstance(base, (int, float)) else 0.0)
            kind = f"{kind}-at-{start}s"
        elif not incidents and i % 20 == 7:
            kind, fault = FLEET_FAULTS[(i // 20) % len(FLEET_FAULTS)]
            sig.update(fault)
        over = {"name": f"fleet-bench.{i}.{kind}", "host": f"gpu-node-{i + 1:03d}",
                "labels": {"pod": f"vllm-{i}"}, "signals": sig}
        if hours is not None:
            over["duration_s"] = int(round(hours * 3600))
        if step is not None:
            over["interval_s"] = int(step)
        out.append(merge(BUILTIN, over))
    return out


# ----------------------------------------------------------------------------------------------
# Verifier: parse an OpenMetrics file and recompute the adapters' signals (Prometheus semantics)

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+(\S+))?\s*$')


def parse_labels(s):
    labels, i, n = {}, 1, len(s)
    while i < n - 1:
        j = s.index("=", i)
        key = s[i:j].strip().lstrip(",").strip()
        assert s[j + 1] == '"', s
        k = j + 2
        val = []
        while s[k] != '"':
            if s[k] == "\\":
                nxt = s[k + 1]
                val.append({"n": "\n", "\\": "\\", '"': '"'}.get(nxt, "\\" + nxt))
                k += 2
            else:
                val.append(s[k])
                k += 1
        labels[key] = "".join(val)
        i = k + 1
        while i < n and s[i] in ", ":
            i += 1
    return labels


def parse_om(path):
    series = {}
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if not line.strip() or line.startswith("#"):
                continue
            m = SAMPLE_RE.match(line)
            if not m:
                raise ValueError(f"cannot parse {line!r}")
            name, lt, val, ts = m.groups()
            labels = parse_labels(lt) if lt else {}
            key = (name, tuple(sorted(labels.items())))
            v = float(val.replace("Inf", "inf"))
            series.setdefault(key, []).append((int(round(float(ts) * 1000)), v))
    return series


def prom_rate(samples, end, win, is_rate=True):
    start = end - win
    s = [x for x in samples if start < x[0] <= end and math.isfinite(x[1])]
    if len(s) < 2:
        return None
    resets = 0.0
    for a, b in zip(s, s[1:]):
        if b[1] < a[1]:
            resets += a[1]
    first, last = s[0], s[-1]
    sampled = (last[0] - first[0]) / 1000
    result = last[1] - first[1] + resets
    to_start = (first[0] - start) / 1000
    to_end = (end - last[0]) / 1000
    avg = sampled / (len(s) - 1)
    if to_start >= avg * 1.1:
        to_start = avg / 2
    if result > 0 and first[1] >= 0:
        to_zero = sampled * (first[1] / result)
        if to_zero < to_start:
            to_start = to_zero
    if to_end >= avg * 1.1:
        to_end = avg / 2
    factor = (sampled + to_start + to_end) / sampled
    if is_rate:
        factor /= win / 1000
    return result * factor


def prom_quantile(q, buckets):
    buckets = sorted(buckets)
    merged = []
    for le, c in buckets:
        if merged and merged[-1][0] == le:
            merged[-1][1] += c
        else:
            merged.append([le, c])
    mx = -INF
    for b in merged:
        b[1] = max(b[1], mx)
        mx = b[1]
    if len(merged) < 2 or merged[-1][0] != INF or merged[-1][1] == 0:
        return None
    total = merged[-1][1]
    rank = q * total
    idx = next((i for i, (_, c) in enumerate(merged[:-1]) if c >= rank), len(merged) - 1)
    if idx == len(merged) - 1:
        return merged[-2][0]
    end, count = merged[idx]
    start = 0.0
    if idx > 0:
        start = merged[idx - 1][0]
        count -= merged[idx - 1][1]
        rank -= merged[idx - 1][1]
    return start + (end - start) * (rank / count)


class Evaluator:
    def __init__(self, series, window_s=WINDOW_S):
        self.by_name = {}
        for (name, labels), samples in series.items():
            self.by_name.setdefault(name, []).append((dict(labels), samples))
        self.end = max(s[-1][0] for s in series.values())
        self.win = window_s * 1000
        self.stat = "last"  # gauge statistic: last, mean, min, max (like the Rust Stat)

    def select(self, sel, suffix=""):
        names = sel["metric"] if isinstance(sel["metric"], list) else [sel["metric"]]
        for n in names:
            found = self.by_name.get(n + suffix)
            if found:
                def ok(lab):
                    for k, vals in (sel.get("where") or {}).items():
                        vals = vals if isinstance(vals, list) else [vals]
                        if lab.get(k) not in [str(x) for x in vals]:
                            return False
                    for k, vals in (sel.get("where_not") or {}).items():
                        vals = vals if isinstance(vals, list) else [vals]
                        if lab.get(k) in [str(x) for x in vals]:
                            return False
                    return True
                return [(lab, s) for lab, s in found if ok(lab)], n
        return None, None

    @staticmethod
    def key(lab):
        return tuple(sorted((k, v) for k, v in lab.items() if k != "le"))

    def ev(self, e):
        (op, arg), = e.items()
        if op in ("gauge", "rate", "increase", "bit_share"):
            found, _ = self.select(arg)
            if not found:
                return None
            out = {}
            for lab, s in found:
                w = [x for x in s if self.end - self.win < x[0] <= self.end and math.isfinite(x[1])]
                if op == "gauge":
                    vals = [x[1] for x in w]
                    val = None if not vals else {"last": vals[-1], "mean": sum(vals) / len(vals),
                                                 "min": min(vals), "max": max(vals)}[self.stat]
                elif op == "bit_share":
                    val = (sum(1 for x in w if int(x[1]) & int(arg["mask"])) / len(w)) if w else None
                else:
                    val = prom_rate(s, self.end, self.win, op == "rate")
                if val is not None:
                    out[self.key(lab)] = val
            return out or None
        if op == "quantile":
            found, _ = self.select(arg, "_bucket")
            if not found:
                return None
            b = []
            for lab, s in found:
                r = prom_rate(s, self.end, self.win)
                if r is not None:
                    b.append((INF if lab["le"] == "+Inf" else float(lab["le"]), r))
            v = prom_quantile(float(arg["q"]), b)
            return None if v is None else {(): v}
        if op == "hist_mean":
            s = self.ev({"sum": {"rate": {**arg, "metric": self._first(arg, "_sum")}}})
            c = self.ev({"sum": {"rate": {**arg, "metric": self._first(arg, "_count")}}})
            if not s or not c or c[()] <= 0:
                return None
            return {(): s[()] / c[()]}
        if op in ("sum", "max", "min", "avg", "count"):
            x = self.ev(arg)
            if not x:
                return None
            vals = list(x.values())
            return {(): {"sum": sum, "max": max, "min": min, "avg": lambda v: sum(v) / len(v),
                         "count": len}[op](vals)}
        if op == "scale":
            x = self.ev(arg[0])
            return x and {k: v * float(arg[1]) for k, v in x.items()}
        if op == "percent_to_ratio":
            x = self.ev(arg)
            if x and any(v > 1 for v in x.values()):
                x = {k: v / 100 for k, v in x.items()}
            return x
        if op == "const":
            return {(): float(arg)}
        if op in ("div", "sub", "add"):
            parts = [self.ev(a) for a in arg]
            if any(p is None for p in parts):
                return None
            acc = parts[0]
            for p in parts[1:]:
                acc = self.binary(acc, p, op)
                if acc is None:
                    return None
            return acc
        if op == "first":
            for a in arg:
                x = self.ev(a)
                if x:
                    return x
            return None
        if op == "zero_when_absent":
            # a counter that has never been incremented has no series: zero where its sibling has
            x = self.ev(arg[0])
            if x:
                return x
            sibling = self.ev(arg[1])
            return {k: 0.0 for k in sibling} if sibling else None
        raise ValueError(f"unknown op {op}")

    def _first(self, sel, suffix):
        names = sel["metric"] if isinstance(sel["metric"], list) else [sel["metric"]]
        for n in names:
            if self.by_name.get(n + suffix):
                return n + suffix
        return names[0] + suffix

    @staticmethod
    def binary(a, b, op):
        f = {"div": lambda x, y: x / y if y != 0 else None, "sub": lambda x, y: x - y,
             "add": lambda x, y: x + y}[op]
        out = {}
        if len(b) == 1 and () in b:
            for k, x in a.items():
                r = f(x, b[()])
                if r is not None:
                    out[k] = r
        elif len(a) == 1 and () in a:
            for k, y in b.items():
                r = f(a[()], y)
                if r is not None:
                    out[k] = r
        else:
            for k, x in a.items():
                if k in b:
                    r = f(x, b[k])
                    if r is not None:
                        out[k] = r
        return out or None


def reads_gauge(e):
    (op, arg), = e.items()
    if op == "gauge":
        return True
    if op in ("sum", "max", "min", "avg", "count", "percent_to_ratio"):
        return reads_gauge(arg)
    if op == "scale":
        return reads_gauge(arg[0])
    if op in ("div", "sub", "add", "first", "zero_when_absent"):
        return any(reads_gauge(a) for a in arg)
    return False


def compute_signals(path, engine="vllm", series=None):
    """Signal -> value, and for gauge signals -> (min, mean, max) over the window. Adapters are
    read engine first, then dcgm and node; like the program, a signal an earlier adapter cannot
    compute is taken from a later one."""
    ev = Evaluator(parse_om(path) if series is None else series)
    out, stats = {}, {}
    for fname in (ENGINES[engine][2], "dcgm.yaml", "node.yaml"):
        with open(RULES_DIR / fname, encoding="utf-8") as fh:
            spec = yaml.safe_load(fh)
        for sig, expr in (spec.get("signals") or {}).items():
            if out.get(sig) is not None:
                continue
            ev.stat = "last"
            r = ev.ev(expr)
            out[sig] = None if not r else (r[()] if () in r else sum(r.values()))
            if r and reads_gauge(expr):
                st = []
                for stat in ("min", "mean", "max"):
                    ev.stat = stat
                    x = ev.ev(expr)
                    st.append(None if not x else (x[()] if () in x else sum(x.values())))
                stats[sig] = st
            ev.stat = "last"
    return out, stats, ev


def compute_facts(ev, engine):
    """The facts the engine adapter reads from metrics (gauge_facts, info_facts, label_facts)."""
    with open(RULES_DIR / ENGINES[engine][2], encoding="utf-8") as fh:
        spec = yaml.safe_load(fh)
    out = []
    for fact, sel in (spec.get("gauge_facts") or {}).items():
        ev.stat = "last"
        r = ev.ev({"max": {"gauge": sel}})
        if r:
            out.append(f"{fact}={fmt_go(r[()])} (gauge {sel['metric']})")
    for info in spec.get("info_facts") or []:
        found = ev.by_name.get(info["metric"]) or []
        if found:
            lab = found[0][0]
            for label, fact in (info.get("labels") or {}).items():
                if lab.get(label) not in (None, "", "None"):
                    out.append(f"{fact}={lab[label]} ({info['metric']}{{{label}}})")
    detect = spec.get("detect") or []
    for label, fact in (spec.get("label_facts") or {}).items():
        vals = sorted({lab[label] for name, lst in ev.by_name.items() if any(name.startswith(p) for p in detect)
                       for lab, _ in lst if label in lab})
        if vals:
            out.append(f"{fact}={vals[0]} (label {label})")
    return out


def target_present(sc, b, sig, job):
    """Whether the recording should let the adapters compute `sig` (nulls, omits, options)."""
    if sig in sc.nulls or sig in b.absent:
        return False
    if sig == "spec_decode_acceptance_ratio" and sc.spec(sig) is None:
        return False
    if job in sc.omit:
        return False
    if sc.engine == "vllm" or job != sc.job:
        return not any(f in sc.omit for f in signal_families(sig))
    if sig not in engine_signals(sc.cfg):  # a constant the adapter states
        return True
    fams = engine_signals(sc.cfg)[sig][0]
    return not (fams and all(f in sc.omit for f in fams))


def targets(sc, b, plan=None):
    """What each signal should come out at (per its kind in the plan), from the scenario."""
    out = {}
    plan = plan or signal_plan(sc)
    grids = {j: Grid(sc, j) for j in {job for _, job in plan.values()}}
    for sig, (kind, job) in plan.items():
        if not target_present(sc, b, sig, job):
            continue
        g = grids[job]
        w = g.w_intervals
        end_tau = float(g.tau[-1])
        mids = [g.mid(k) for k in range(g.n - w, g.n)]
        if kind == "const":
            out[sig] = const_value(adapter_signals(ENGINES[sc.engine][2])[sig])
            b.model[sig] = out[sig]
        elif kind in ("rate", "share"):
            if sig == "prefix_cache_hit_ratio":  # token-weighted
                num = sum(sc.val("prompt_tokens_per_second", t) * sc.val(sig, t) for t in mids)
                out[sig] = num / sum(sc.val("prompt_tokens_per_second", t) for t in mids)
            elif sig in ("error_ratio", "abort_ratio") and sc.engine != "vllm":  # failed / (finished + failed)
                odds = [min(max(sc.val(sig, t), 0.0), 0.95) for t in mids]
                odds = [e / (1 - e) for e in odds]
                num = sum(sc.val("requests_per_second", t) * o for t, o in zip(mids, odds))
                out[sig] = num / sum(sc.val("requests_per_second", t) * (1 + o) for t, o in zip(mids, odds))
            elif sig in ("truncation_ratio", "error_ratio", "abort_ratio"):
                num = sum(sc.val("requests_per_second", t) * sc.val(sig, t) for t in mids)
                out[sig] = num / sum(sc.val("requests_per_second", t) for t in mids)
            elif kind == "share":
                pts = g.tau[g.n - 1 - w:]
                out[sig] = sum(min(max(sc.val(sig, t), 0), 1) for t in pts) / len(pts)
            else:
                out[sig] = sum(sc.val(sig, t) for t in mids) / len(mids)
        else:
            out[sig] = sc.val(sig, end_tau)
    if "gpu_xid_error_code" in out:
        out["gpu_xid_error_code"] = round(out["gpu_xid_error_code"])
    if sc.engine == "triton" and "triton" not in sc.omit and "nv_gpu_utilization" not in sc.omit:
        out["gpu_count"] = float(sc.cfg["gpus"])
    elif "dcgm" not in sc.omit and "DCGM_FI_DEV_GPU_UTIL" not in sc.omit:
        out["gpu_count"] = float(sc.cfg["gpus"])
    return out


def verify(cfg, path):
    if cfg.get("fleet"):
        return verify_fleet(cfg, path)
    _, sc, b = render(cfg)
    got, stats, ev = compute_signals(path, sc.engine)
    return verify_rows(cfg, sc, b, got, stats, ev, path)


def member_series(series, host, pod):
    """The series of one fleet member: by its pod label, else by host (instance or Hostname)."""
    out = {}
    for key, samples in series.items():
        lab = dict(key[1])
        if pod:
            ok = lab.get("pod") == str(pod)
        else:
            inst = lab.get("instance", "")
            ok = inst.rsplit(":", 1)[0] == host or lab.get("Hostname") == host
        if ok:
            out[key] = samples
    return out


def verify_fleet(cfg, path):
    text, _, built = render(cfg)
    series = parse_om(path)
    bad = 0
    for m, (sc, b) in zip(cfg["fleet"], built):
        sub = member_series(series, m["host"], m["pod"])
        got, stats, ev = compute_signals(path, sc.engine, series=sub)
        ident = f"pod={m['pod']} " if m["pod"] else ""
        bad += verify_rows(m["cfg"], sc, b, got, stats, ev, path,
                           title=f"fleet {cfg['name']} member {ident}host={m['host']} ({m['scenario']})  file {path}")
        print()
    n_series = len(series)
    print(f"fleet {cfg['name']}: {len(cfg['fleet'])} replicas, {n_series} series in the file")
    return bad


def verify_rows(cfg, sc, b, got, stats, ev, path, title=None):
    plan = signal_plan(sc)
    tgt = targets(sc, b, plan)
    rows = []
    bad = 0
    names = [s for s in SIGNAL_KIND] + ["gpu_count"]
    for sig in names:
        t = tgt.get(sig)
        c = got.get(sig)
        if t is None and c is None:
            continue
        kind, job = plan.get(sig, (SIGNAL_KIND.get(sig, "gauge"), "dcgm"))
        dyn = sc.dynamic(sig) if sig in SIGNAL_FAMILIES else False
        note = ""
        if t is None:
            status = "UNEXPECTED"
            bad += 1
        elif c is None:
            status = "MISSING"
            bad += 1
        else:
            reach = b.reach.get(sig)
            rel = 0.06 if kind == "hist" else 0.03
            share_res = 0.5 / Grid(sc, job).w_samples + 1e-9 if kind == "share" else 0.0
            tol = max(rel * abs(t), share_res, 1e-3 if t < 1.5 else 0.0)
            if kind == "gauge" and sig in ("queue_depth", "running_requests", "gpu_temperature_celsius"):
                tol = max(tol, 0.5)
            # integer counts: one event more or less in the window
            win_s = Grid(sc, sc.job).w_intervals * sc.interval
            n_req = (b.model.get("requests_per_second") or 0) * win_s
            count_tol = {"error_ratio": 1 / max(n_req, 1), "truncation_ratio": 1 / max(n_req, 1),
                         "preemptions_per_second": 1 / win_s, "pcie_replays_per_second": 1 / win_s}.get(sig, 0)
            if tol < abs(c - t) <= count_tol:
                note = f"count-limited: {n_req:.0f} requests in the window"
            tol = max(tol, count_tol)
            if kind == "const":
                note = "stated by the adapter (constant), not read from the recording"
            if abs(c - t) <= tol:
                status = "ok"
            elif reach is not None and abs(c - reach) <= max(rel * abs(reach), 1e-3):
                status = "ok*"
                note = f"bucket-limited: nearest reachable {reach:.4g}"
            elif sig in b.intq and abs(c - b.intq[sig][0]) <= 1e-6 * max(1.0, abs(c)) and b.intq[sig][1] < 300:
                status = "ok#"
                note = (f"count-limited: {b.intq[sig][1]} observations in the window; "
                        f"integer counts cannot get closer")
            elif dyn and kind == "hist" and sig in b.model and abs(c - b.model[sig]) <= max(rel * abs(b.model[sig]), 1e-3):
                status = "ok~"
                note = f"ramped: window mix of the model = {b.model[sig]:.4g}"
            else:
                status = "OFF"
                bad += 1
        if dyn and not note:
            note = "ramped/stepped target"
        if sig in stats and c is not None and (sig in ("queue_depth", "running_requests", "kv_cache_usage_ratio")
                                               or stats[sig][0] != stats[sig][2]):
            mn, av, mx = stats[sig]
            note = (note + "  " if note else "") + f"window min/avg/max {mn:.4g}/{av:.4g}/{mx:.4g}"
        rows.append((sig, t, b.model.get(sig), c, status, note))
    fmt = lambda x: "-" if x is None else f"{x:.5g}"
    print(title or f"scenario {cfg['name']}  file {path}  (window: last {WINDOW_S}s before the newest sample)")
    if sc.engine != "vllm":
        print(f"engine {sc.engine} (rules/signals/{ENGINES[sc.engine][2]}, then dcgm.yaml, node.yaml)")
    print(f"{'signal':32} {'target':>11} {'model':>11} {'computed':>11}  status")
    for sig, t, m, c, st, note in rows:
        print(f"{sig:32} {fmt(t):>11} {fmt(m):>11} {fmt(c):>11}  {st}{'  ' + note if note else ''}")
    if sc.engine != "vllm":
        facts = compute_facts(ev, sc.engine)
        if facts:
            print("facts from metrics: " + "; ".join(facts))
        missing = sorted(s for s in SIGNAL_KIND if s not in plan or s in b.absent)
        if missing:
            print(f"not exported by {sc.engine} here (reported unknown): {', '.join(missing)}")
    return bad


# ----------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default=str(SCENARIOS_FILE), help="scenario file")
    ap.add_argument("--out", default=str(FIXTURES), help="output directory")
    ap.add_argument("--only", metavar="NAME", help="write only this scenario")
    ap.add_argument("--check", action="store_true", help="fail if committed fixtures are stale")
    ap.add_argument("--verify", metavar="NAME", help="recompute signals from NAME's file and compare ('bench' for --bench)")
    ap.add_argument("--file", help="file to verify (default: <out>/<NAME>.om, or the --bench file)")
    ap.add_argument("--bench", metavar="OUT.om", help="write the large benchmark recording")
    ap.add_argument("--fleet-bench", nargs=2, metavar=("N", "OUT.om"),
                    help="write N vLLM replicas (a fleet throughput benchmark) to OUT.om (.gz: compressed)")
    ap.add_argument("--hours", type=float, help="--fleet-bench: recording length in hours (default 10 minutes); "
                    "written as a stream through gzip, so OUT must end in .gz")
    ap.add_argument("--step", type=int, help="--fleet-bench: scrape interval in seconds (default 15)")
    ap.add_argument("--incidents", action="store_true",
                    help="--fleet-bench: three replicas faulty for an hour each (an eighth of the "
                    "recording when shorter) at 20, 50 and 75 %% of it, with different causes, "
                    "instead of one in twenty faulty all along")
    ap.add_argument("--list", action="store_true", help="list scenario names")
    args = ap.parse_args(argv)

    if args.fleet_bench and (args.hours is not None or args.step is not None):
        n, path = int(args.fleet_bench[0]), Path(args.fleet_bench[1])
        if not str(path).endswith(".gz"):
            sys.exit("--hours/--step write through gzip: OUT must end in .gz")
        size, lines = write_fleet_stream(fleet_bench_cfgs(n, args.hours, args.step, args.incidents), path)
        faulty = len(incident_replicas(n)) if args.incidents else sum(1 for i in range(n) if i % 20 == 7)
        print(f"wrote {path} ({n} replicas, {faulty} faulty; {size:,} bytes of text, {lines:,} lines; "
              f"{path.stat().st_size:,} bytes compressed)")
        return 0
    if args.fleet_bench:
        n, path = int(args.fleet_bench[0]), Path(args.fleet_bench[1])
        chunks, _ = render_members(fleet_bench_cfgs(n), keep=False)
        size = sum(len(c) for c in chunks)
        lines = sum(c.count("\n") for c in chunks)
        if str(path).endswith(".gz"):
            with gzip.open(path, "wb", compresslevel=6, mtime=0) as fh:
                for c in chunks:
                    fh.write(c.encode("utf-8"))
        else:
            with open(path, "w", encoding="utf-8", newline="\n") as fh:
                fh.writelines(chunks)
        faulty = sum(1 for i in range(n) if i % 20 == 7)
        print(f"wrote {path} ({n} replicas, {faulty} faulty; {size:,} bytes of text, {lines:,} lines"
              f"{f'; {path.stat().st_size:,} bytes compressed' if str(path).endswith('.gz') else ''})")
        return 0
    if args.bench:
        path = Path(args.bench)
        cfg = bench_cfg()
        text, _, _ = render(cfg)
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        print(f"wrote {path} ({len(text):,} bytes, {text.count(chr(10)):,} lines)")
        if args.verify == "bench":
            return 1 if verify(cfg, path) else 0
        return 0

    scenarios = load_scenarios(Path(args.scenarios))
    if args.list:
        for s in scenarios:
            print(s["name"])
        return 0
    if args.verify:
        if args.verify == "bench":
            cfg = bench_cfg()
            path = Path(args.file) if args.file else None
            if path is None:
                sys.exit("--verify bench needs --file or --bench")
        else:
            match = [s for s in scenarios if s["name"] == args.verify]
            if not match:
                sys.exit(f"no scenario {args.verify!r}")
            cfg = match[0]
            path = Path(args.file) if args.file else Path(args.out) / f"{cfg['name']}.om.gz"
        return 1 if verify(cfg, path) else 0
    if args.check:
        stale = []
        with tempfile.TemporaryDirectory() as tmp:
            for cfg in scenarios:
                new, _ = write(cfg, tmp)
                old = Path(args.out) / new.name
                if not old.exists():
                    stale.append(f"missing: {old}")
                elif gzip.decompress(old.read_bytes()) != gzip.decompress(new.read_bytes()):
                    stale.append(f"stale: {old}")
        if stale:
            print("\n".join(stale))
            print("regenerate with: python3 scripts/gen_fixtures.py")
            return 1
        print(f"ok: {len(scenarios)} fixtures up to date")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    todo = [s for s in scenarios if not args.only or s["name"] == args.only]
    if args.only and not todo:
        sys.exit(f"no scenario {args.only!r}")
    for cfg in todo:
        path, size = write(cfg, out, warn=True)
        print(f"wrote {path} ({size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
