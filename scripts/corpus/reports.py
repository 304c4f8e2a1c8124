#!/usr/bin/env python3
"""Transcribe the field problem reports into recorded runs: `corpus/reports/<id>.{yaml,om.gz}`.

Every case is one entry of `reports.yaml` beside this script: the numbers a problem report in
`reference/field-reports.yaml` gives (each with its quote), the deployment it describes, and the
label from the report's confirmed root cause. This script turns an entry into

* a 10-minute recording at a 15 s scrape interval (41 scrapes from 1796083200), gzip OpenMetrics
  written with `openmetrics.Recording`: the engine's own series (job = engine, `<host>:<port>`),
  the GPUs' dcgm-exporter series (job "dcgm", `<host>:9400`, `Hostname` = host) and the host's
  node_exporter series (job "node", `<host>:9100`);
* the case file the corpus README describes (label, predicate, provenance, ground truth, notes),
  with the deployment's objectives as `slos:` where the entry has them: an entry's `slos` (objective
  -> number, the `--slo` names of rules/playbooks/symptoms.yaml) are what the report states or clearly
  implies (its own yardstick: a prefill time it calls normal for the hardware, a pace it accepts),
  each derived from quoted numbers, and its `slos_why` (the derivation, quoting the report) goes into
  the case's notes. The label and the diagnosis then judge by the same objectives; an entry without
  `slos` leaves both on the product's defaults.

How a number becomes samples
----------------------------
An entry's `load` (engine side), `gpu` (dcgm-exporter) and `cpu` (node_exporter) blocks hold the
state of the run; `phases` (optionally repeating every `cycle` seconds) override keys from a time
on, for incidents that have a time course (a burst, a staircase, a preemption loop, a crash loop).
For each 15 s interval the state gives

* counters: increments at the state's rates (requests/s, tokens/s, preemptions/s...);
* gauges: the state's value with a little deterministic noise (seeded by the case id);
* histograms: `rate x 15 s` observations spread over the engine's real bucket bounds by a
  log-normal fitted to the given p50/p99 (or a mixture of several), accumulated as expected
  counts and rounded cumulatively, so `histogram_quantile` over the run returns the given
  quantiles up to bucket interpolation;
* restarts: a phase with `up: false` removes the engine's series for as long as it lasts; a case
  with such phases also gets the target's `up` series (0 while down), and the engine's counters
  and histograms start from zero when it comes back, as a new process's do.

Which metric a quantity becomes is data (ENGINES below: one table per exporter); the emitters
(`emit_counter`, `emit_gauge`, `emit_histogram`) are shared by every engine.

Usage
    python3 scripts/corpus/reports.py            # write every case
    python3 scripts/corpus/reports.py --only ID  # one case
    python3 scripts/corpus/reports.py --check    # parse every written recording and check it
"""

import argparse
import math
import random
import sys
import textwrap
import zlib
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "scripts"))

from openmetrics import Recording  # noqa: E402
from gen_fixtures import (  # noqa: E402  small shared helpers: real bucket bounds, a parser
    TTFT_BUCKETS, ITL_BUCKETS, REQ_BUCKETS, SGL_TTFT_BUCKETS, SGL_ITL_BUCKETS, SGL_E2E_BUCKETS,
    TRITON_TOKEN_BUCKETS, buckets_125, parse_om, prom_quantile)

DATA = HERE / "reports.yaml"
OUT = ROOT / "corpus" / "reports"
START = 1796083200
STEP = 15
SCRAPES = 41
UPTIME_S = 1800          # the server ran this long before the first scrape (counter start values)
Z99 = 2.3263478740408408
INF = float("inf")

# Bucket bounds not in gen_fixtures, from reference/engine-metrics.md.
SGL_QUEUE_BUCKETS = [0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
                     200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000,
                     2500, 3000]                                     # §2.1 sglang:queue_time_seconds
V0_TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                   5.0, 7.5, 10.0]                                   # §1.3 V0: top bucket 10 s
V0_TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5]
V0_E2E_BUCKETS = [1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0]
# §3 TGI router: every `*_duration` histogram has the buckets 0.0001 * 1.5^k, k = 1..35 (0.15 ms to
# 145.6 s; router/src/server.rs, the same since v0.8); token histograms are set per case ("tgi_input":
# max_input_tokens / 100 * (1..100), "tgi_total": max_total_tokens / 100 * (1..100)).
TGI_DURATION_BUCKETS = [0.0001 * 1.5 ** k for k in range(1, 36)]

# ----------------------------------------------------------------------------------------------
# Engine name maps (data). Each row: quantity -> (kind, metric name, extra labels, buckets).
# Kinds: counter (Recording.counter adds _total), plain (a counter whose exposed name has no
# _total, typed `unknown` as OpenMetrics requires), gauge, hist. Quantities are the keys of a
# case's `load` block or derived from them in `engine_state`.

ENGINES = {
    "vllm": {  # vLLM V1 (§1.1); labels model_name, engine
        "job": "vllm", "port": 8000,
        "labels": lambda c: {"model_name": c["model"], "engine": "0"},
        "rows": [
            ("prompt_tps", "counter", "vllm:prompt_tokens", {}),
            ("gen_tps", "counter", "vllm:generation_tokens", {}),
            ("ok_rps", "counter", "vllm:request_success", {"finished_reason": "stop"}),
            ("length_rps", "counter", "vllm:request_success", {"finished_reason": "length"}),
            ("abort_rps", "counter", "vllm:request_success", {"finished_reason": "abort"}),
            ("preempt", "counter", "vllm:num_preemptions", {}),
            ("prompt_tps", "counter", "vllm:prefix_cache_queries", {}),
            ("hit_tps", "counter", "vllm:prefix_cache_hits", {}),
            ("running", "gauge", "vllm:num_requests_running", {}),
            ("waiting", "gauge", "vllm:num_requests_waiting", {}),
            ("kv", "gauge", "vllm:kv_cache_usage_perc", {}),
            ("ttft", "hist", "vllm:time_to_first_token_seconds", TTFT_BUCKETS),
            ("itl", "hist", "vllm:inter_token_latency_seconds", ITL_BUCKETS),
            ("tpot", "hist", "vllm:request_time_per_output_token_seconds", ITL_BUCKETS),
            ("e2e", "hist", "vllm:e2e_request_latency_seconds", REQ_BUCKETS),
            ("queue", "hist", "vllm:request_queue_time_seconds", REQ_BUCKETS),
            ("prompt_len", "hist", "vllm:request_prompt_tokens", "125"),
            ("output_len", "hist", "vllm:request_generation_tokens", "125"),
        ],
        # The API server's prometheus-fastapi-instrumentator (§1.5): every answer by grouped status, with
        # no engine labels, requests refused before they reach the engine included. Written only for a
        # case whose load sets http_5xx_rps (see http_series).
        "http_rows": [("http_2xx_rps", "2xx"), ("http_5xx_rps", "5xx")],
    },
    "vllm-v0": {  # vLLM V0 (§1.3): old names, model_name only, V0 buckets
        "job": "vllm", "port": 8000,
        "labels": lambda c: {"model_name": c["model"]},
        "rows": [
            ("prompt_tps", "counter", "vllm:prompt_tokens", {}),
            ("gen_tps", "counter", "vllm:generation_tokens", {}),
            ("ok_rps", "counter", "vllm:request_success", {"finished_reason": "stop"}),
            ("length_rps", "counter", "vllm:request_success", {"finished_reason": "length"}),
            ("preempt", "counter", "vllm:num_preemptions", {}),
            ("running", "gauge", "vllm:num_requests_running", {}),
            ("waiting", "gauge", "vllm:num_requests_waiting", {}),
            ("swapped", "gauge", "vllm:num_requests_swapped", {}),
            ("kv", "gauge", "vllm:gpu_cache_usage_perc", {}),
            ("ttft", "hist", "vllm:time_to_first_token_seconds", V0_TTFT_BUCKETS),
            ("itl", "hist", "vllm:time_per_output_token_seconds", V0_TPOT_BUCKETS),
            ("e2e", "hist", "vllm:e2e_request_latency_seconds", V0_E2E_BUCKETS),
            ("prompt_len", "hist", "vllm:request_prompt_tokens", "125"),
            ("output_len", "hist", "vllm:request_generation_tokens", "125"),
        ],
    },
    "sglang": {  # SGLang scheduler + tokenizer collectors (§2.1, §2.2)
        "job": "sglang", "port": 30000,
        "labels": lambda c: {"model_name": c["model"], "engine_type": "unified", "tp_rank": "0",
                             "pp_rank": "0", "moe_ep_rank": "0"},
        "rows": [
            ("prompt_tps", "counter", "sglang:prompt_tokens", {}),
            ("gen_tps", "counter", "sglang:generation_tokens", {}),
            ("hit_tps", "counter", "sglang:cached_tokens", {"cache_source": "total"}),
            ("ok_rps", "counter", "sglang:num_requests", {}),
            ("abort_rps", "counter", "sglang:num_aborted_requests", {}),
            ("preempt", "counter", "sglang:num_retracted_requests", {}),
            ("compute_tps", "counter", "sglang:realtime_tokens", {"mode": "prefill_compute"}),
            ("hit_tps", "counter", "sglang:realtime_tokens", {"mode": "prefill_cache"}),
            ("gen_tps", "counter", "sglang:realtime_tokens", {"mode": "decode"}),
            ("running", "gauge", "sglang:num_running_reqs", {}),
            ("waiting", "gauge", "sglang:num_queue_reqs", {}),
            ("kv", "gauge", "sglang:token_usage", {}),
            ("used_tokens", "gauge", "sglang:num_used_tokens", {}),
            ("kv_capacity", "gauge", "sglang:max_total_num_tokens", {}),
            ("gen_tps", "gauge", "sglang:gen_throughput", {}),
            ("cuda_graph", "gauge", "sglang:is_cuda_graph", {}),
            ("ttft", "hist", "sglang:time_to_first_token_seconds", SGL_TTFT_BUCKETS),
            ("itl", "hist", "sglang:inter_token_latency_seconds", SGL_ITL_BUCKETS),
            ("e2e", "hist", "sglang:e2e_request_latency_seconds", SGL_E2E_BUCKETS),
            ("queue", "hist", "sglang:queue_time_seconds", SGL_QUEUE_BUCKETS),
        ],
    },
    "triton": {  # Triton core (§4.1) + TensorRT-LLM backend gauges (§4.2); counters lack _total
        "job": "triton", "port": 8002,
        "labels": lambda c: {"model": c["model"], "version": "1"},
        "rows": [
            ("ok_rps", "plain", "nv_inference_request_success", {}),
            ("fail_rps", "plain", "nv_inference_request_failure", {"reason": "CANCELED"}),
            ("infer_rps", "plain", "nv_inference_count", {}),
            ("exec_rps", "plain", "nv_inference_exec_count", {}),
            ("request_us", "plain", "nv_inference_request_duration_us", {}),
            ("queue_us", "plain", "nv_inference_queue_duration_us", {}),
            ("compute_us", "plain", "nv_inference_compute_infer_duration_us", {}),
            ("waiting", "gauge", "nv_inference_pending_request_count", {}),
            ("running", "gauge", "nv_trt_llm_request_metrics", {"request_type": "active"}),
            ("max_batch", "gauge", "nv_trt_llm_request_metrics", {"request_type": "max"}),
            ("scheduled", "gauge", "nv_trt_llm_request_metrics", {"request_type": "scheduled"}),
            ("context_reqs", "gauge", "nv_trt_llm_request_metrics", {"request_type": "context"}),
            ("trt_waiting", "gauge", "nv_trt_llm_request_metrics", {"request_type": "waiting"}),
            ("kv_max", "gauge", "nv_trt_llm_kv_cache_block_metrics", {"kv_cache_block_type": "max"}),
            ("kv_used", "gauge", "nv_trt_llm_kv_cache_block_metrics", {"kv_cache_block_type": "used"}),
            ("kv_free", "gauge", "nv_trt_llm_kv_cache_block_metrics", {"kv_cache_block_type": "free"}),
            ("kv_block", "gauge", "nv_trt_llm_kv_cache_block_metrics", {"kv_cache_block_type": "tokens_per"}),
            ("kv", "gauge", "nv_trt_llm_kv_cache_block_metrics", {"kv_cache_block_type": "fraction"}),
            ("paused", "gauge", "nv_trt_llm_inflight_batcher_metrics",
             {"inflight_batcher_specific_metric": "paused_requests"}),
            ("gen_reqs", "gauge", "nv_trt_llm_inflight_batcher_metrics",
             {"inflight_batcher_specific_metric": "generation_requests"}),
            ("prompt_len", "hist", "nv_llm_input_token_len", TRITON_TOKEN_BUCKETS,
             {"response_metric_type": "total_input_tokens"}),
            ("output_len", "hist", "nv_llm_output_token_len", TRITON_TOKEN_BUCKETS,
             {"response_metric_type": "total_output_tokens"}),
        ],
    },
    "tgi": {  # HF TGI router (§3): no labels of its own, counters without _total (exposed as
        # written, typed unknown like Triton's), duration histograms on TGI's 1.5^k buckets.
        # tgi_request_count counts every request at the handler's entry, refused ones included;
        # the durations, token histograms and tgi_request_success are recorded for requests that
        # finish (obs_rate). tgi_batch_max_total_tokens exists from the v3 backend on: a case sets
        # `max_batch_total_tokens` in its load only for a version that exports it. The `metrics`
        # crate shows a counter once it was first incremented: one that stays zero is left out.
        "job": "tgi", "port": 80, "skip_zero_counters": True,
        "labels": lambda c: {},
        "obs_rate": {"e2e": "ok_rps", "queue": "ok_rps", "tpot": "ok_rps", "validation": "ok_rps",
                     "inference": "ok_rps", "prompt_len": "ok_rps", "output_len": "ok_rps"},
        "rows": [
            ("rps", "plain", "tgi_request_count", {}),
            ("ok_rps", "plain", "tgi_request_success", {}),
            ("overloaded_rps", "plain", "tgi_request_failure", {"err": "overloaded"}),
            ("validation_rps", "plain", "tgi_request_failure", {"err": "validation"}),
            ("generation_rps", "plain", "tgi_request_failure", {"err": "generation"}),
            ("waiting", "gauge", "tgi_queue_size", {}),
            ("running", "gauge", "tgi_batch_current_size", {}),
            ("batch_tokens", "gauge", "tgi_batch_current_max_tokens", {}),
            ("max_batch_total_tokens", "gauge", "tgi_batch_max_total_tokens", {}),
            ("e2e", "hist", "tgi_request_duration", TGI_DURATION_BUCKETS),
            ("validation", "hist", "tgi_request_validation_duration", TGI_DURATION_BUCKETS),
            ("queue", "hist", "tgi_request_queue_duration", TGI_DURATION_BUCKETS),
            ("inference", "hist", "tgi_request_inference_duration", TGI_DURATION_BUCKETS),
            ("tpot", "hist", "tgi_request_mean_time_per_token_duration", TGI_DURATION_BUCKETS),
            ("prompt_len", "hist", "tgi_request_input_length", "tgi_input"),
            ("output_len", "hist", "tgi_request_generated_tokens", "tgi_total"),
        ],
    },
    "llamacpp": {  # llama-server --metrics (§5): no labels beyond job/instance
        "job": "llamacpp", "port": 8080,
        "labels": lambda c: {},
        "rows": [
            ("prompt_tps", "counter", "llamacpp:prompt_tokens", {}),
            ("prompt_busy", "counter", "llamacpp:prompt_seconds", {}),
            ("gen_tps", "counter", "llamacpp:tokens_predicted", {}),
            ("gen_busy", "counter", "llamacpp:tokens_predicted_seconds", {}),
            ("decode_calls", "counter", "llamacpp:n_decode", {}),
            ("pp_speed", "gauge", "llamacpp:prompt_tokens_seconds", {}),
            ("tg_speed", "gauge", "llamacpp:predicted_tokens_seconds", {}),
            ("running", "gauge", "llamacpp:requests_processing", {}),
            ("waiting", "gauge", "llamacpp:requests_deferred", {}),
        ],
    },
}

# dcgm-exporter default-counters fields (§6.1): quantity of a case's `gpu` block -> field.
DCGM_FIELDS = [
    ("util", "DCGM_FI_DEV_GPU_UTIL"), ("sm_clock", "DCGM_FI_DEV_SM_CLOCK"),
    ("mem_clock", "DCGM_FI_DEV_MEM_CLOCK"), ("temp", "DCGM_FI_DEV_GPU_TEMP"),
    ("mem_temp", "DCGM_FI_DEV_MEMORY_TEMP"), ("power", "DCGM_FI_DEV_POWER_USAGE"),
    ("fb_used", "DCGM_FI_DEV_FB_USED"), ("fb_free", "DCGM_FI_DEV_FB_FREE"),
    ("fb_reserved", "DCGM_FI_DEV_FB_RESERVED"), ("mem_copy", "DCGM_FI_DEV_MEM_COPY_UTIL"),
    ("gr_active", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"), ("tensor", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
    ("dram", "DCGM_FI_PROF_DRAM_ACTIVE"), ("pcie_tx", "DCGM_FI_PROF_PCIE_TX_BYTES"),
    ("pcie_rx", "DCGM_FI_PROF_PCIE_RX_BYTES"), ("xid", "DCGM_FI_DEV_XID_ERRORS"),
]

# Neutral values used where a report gives no number (each case's notes say which it uses).
GPU_DEFAULTS = {"util": 60, "temp": 55, "mem_temp": 50, "xid": 0, "pcie_tx": 2.0e8, "pcie_rx": 2.0e8,
                "fb_used_ratio": 0.90}
HOST_DEFAULTS = {"cpus": 16, "busy": 0.15, "iowait": 0.005, "psi": 0.02}

# ----------------------------------------------------------------------------------------------
# Distributions: a log-normal through p50 and p99, or a weighted mixture of several.


def components(spec):
    """[(weight, mu, sigma)] for {p50, p99} | {p50, sigma} | {mix: [[w, p50, p99], ...]}."""
    if spec is None:
        return None
    if "mix" in spec:
        tot = sum(m[0] for m in spec["mix"])
        return [(w / tot, math.log(a), max(math.log(b / a) / Z99, 1e-3)) for w, a, b in spec["mix"]]
    p50 = spec["p50"]
    sigma = math.log(spec["p99"] / p50) / Z99 if "p99" in spec else spec.get("sigma", 0.2)
    return [(1.0, math.log(p50), max(sigma, 1e-3))]


def cdf(comps, x):
    if x <= 0:
        return 0.0
    if math.isinf(x):
        return 1.0
    return sum(w * 0.5 * (1 + math.erf((math.log(x) - mu) / (s * math.sqrt(2)))) for w, mu, s in comps)


def mean(comps):
    return sum(w * math.exp(mu + s * s / 2) for w, mu, s in comps)


def quantile(comps_weighted, q):
    """q-quantile of a mixture given as [(count, comps)] (bisection in log space)."""
    tot = sum(n for n, _ in comps_weighted)
    f = lambda x: sum(n * cdf(c, x) for n, c in comps_weighted) / tot  # noqa: E731
    lo, hi = 1e-6, 1e7
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if f(mid) < q else (lo, mid)
    return math.sqrt(lo * hi)


# ----------------------------------------------------------------------------------------------
# The run's state per interval


def merged(case, t):
    """The case's load/gpu/host blocks with the phase overrides in force at offset t (s)."""
    state = {k: dict(case.get(k) or {}) for k in ("load", "gpu", "cpu")}
    state["up"] = not case.get("engine_down", False)
    cyc = case.get("cycle")
    tt = t % cyc if cyc else t
    for ph in case.get("phases") or []:
        if ph["at"] <= tt:
            for k in ("load", "gpu", "cpu"):
                state[k].update(ph.get(k) or {})
            if "up" in ph:
                state["up"] = ph["up"]
    return state


def engine_state(case, load):
    """Derive the per-second quantities the name maps use from a `load` block."""
    s = dict(load)
    rps = load.get("rps", 0.0)
    if case["engine"] == "tgi":  # rps = requests received; failures by TGI's err label
        for k in ("overloaded_rps", "validation_rps", "generation_rps"):
            s.setdefault(k, 0.0)
        s.setdefault("ok_rps", rps - s["overloaded_rps"] - s["validation_rps"] - s["generation_rps"])
    s.setdefault("ok_rps", rps - load.get("abort_rps", 0.0) - load.get("fail_rps", 0.0)
                 - load.get("length_rps", 0.0))
    s.setdefault("prompt_tps", rps * load.get("prompt_len_mean", load.get("prompt_len", 0)))
    s.setdefault("gen_tps", rps * load.get("output_len_mean", load.get("output_len", 0)))
    hit = load.get("prefix_hit", 0.0)
    s["hit_tps"] = s["prompt_tps"] * hit
    s["compute_tps"] = s["prompt_tps"] - s["hit_tps"]
    s.setdefault("preempt", 0.0)
    # ITL is observed once per engine step per request (several tokens with MTP/spec decode)
    s["step_rate"] = s["gen_tps"] / load.get("tokens_per_step", 1)
    s.setdefault("abort_rps", 0.0)
    s.setdefault("length_rps", 0.0)
    s.setdefault("fail_rps", 0.0)
    if "http_5xx_rps" in load:  # rps reached the engine and was answered 200; the 5xx never reached it
        s.setdefault("http_2xx_rps", rps - s["fail_rps"])
    cap = case.get("kv_capacity_tokens")
    if cap:
        s["kv_capacity"] = cap
        s["used_tokens"] = ("kv", cap)  # a gauge scaled from kv (resolved in emit)
    # Triton: cumulative microseconds per second of wall time = requests/s x mean seconds x 1e6
    if case["engine"] == "triton":
        q, c = load.get("queue_mean", 0.0), load.get("compute_mean", 0.0)
        s["queue_us"] = rps * q * 1e6
        s["compute_us"] = rps * c * 1e6
        s["request_us"] = rps * (q + c + load.get("overhead_mean", 0.0)) * 1e6
        s.setdefault("infer_rps", rps)
        s.setdefault("exec_rps", rps / max(load.get("batch_mean", 1.0), 1e-9))
        if "kv_max" in load:
            s["kv_used"] = ("kv", load["kv_max"])
            s["kv_free"] = ("kv_free", load["kv_max"])
    # llama.cpp: seconds of slot time per second spent in prompt processing / generation
    if case["engine"] == "llamacpp":
        pp, tg = load.get("pp_speed"), load.get("tg_speed")
        s["prompt_busy"] = s["prompt_tps"] / pp if pp else 0.0
        s["gen_busy"] = s["gen_tps"] / tg if tg else 0.0
        s.setdefault("decode_calls", s["gen_tps"] / max(load.get("running", 1), 1)
                     + s["prompt_tps"] / max(load.get("n_batch", 2048), 1))
    # distributions for the token-length histograms
    if "prompt_len" in load and "prompt_len_dist" not in load:
        s["prompt_len_dist"] = {"p50": load["prompt_len"], "sigma": load.get("len_sigma", 0.1)}
    if "output_len" in load and "output_len_dist" not in load:
        s["output_len_dist"] = {"p50": load["output_len"], "sigma": load.get("len_sigma", 0.1)}
    return s


# How many observations a histogram gets per second, by quantity.
OBS_RATE = {"ttft": "rps", "e2e": "rps", "queue": "rps", "tpot": "rps", "prompt_len": "rps",
            "output_len": "rps", "itl": "step_rate"}
DIST_KEY = {"prompt_len": "prompt_len_dist", "output_len": "output_len_dist"}


def obs_rate(case, qty):
    """The key of the rate at which histogram `qty` is observed (an engine may override)."""
    return (ENGINES[case["engine"]].get("obs_rate") or {}).get(qty, OBS_RATE.get(qty, "rps"))


def restarts(case):
    """Whether the case has the engine go down and come back (phases with `up`): then the engine's
    target gets Prometheus' own `up` series, and its counters and histograms start over after
    each gap (a new process)."""
    return any("up" in ph for ph in case.get("phases") or [])

# ----------------------------------------------------------------------------------------------
# Emitters, shared by every engine and exporter


class Rec(Recording):
    """Recording plus counters whose exposed name has no `_total` (Triton, dcgm): typed unknown."""

    def plain(self, name, ts, value, labels=None, help_text=""):
        self._family(name, "unknown", help_text).append((ts, name, labels or {}, value))


def emit_counter(rec, kind, name, labels, times, rates, start):
    """A counter from per-interval rates (per second); starts at `start`."""
    value = start
    gap = False
    for i, ts in enumerate(times):
        if rates[i] is None:
            gap = True
            continue
        if gap and i:  # the process was restarted during the gap: its counters start over
            value = 0.0
        gap = False
        if i:
            value += rates[i] * STEP
        (rec.plain if kind == "plain" else rec.counter)(name, ts, round(value, 3), labels)


def emit_gauge(rec, name, labels, times, values, rng, noise, lo=0.0, hi=None, integer=False):
    for ts, v in zip(times, values):
        if v is None:
            continue
        x = v * (1 + rng.gauss(0, noise)) if noise else v
        x = max(lo, x)
        if hi is not None:
            x = min(hi, x)
        x = round(x) if integer else round(x, 4)
        rec.gauge(name, ts, x, labels)


def emit_histogram(rec, name, labels, times, bounds, per_interval, start_obs):
    """per_interval: [(n_observations, comps)] for each scrape interval (None: series absent)."""
    bounds = [float(b) for b in bounds] + [INF]
    acc = [0.0] * len(bounds)
    total = 0.0
    first = next((p for p in per_interval if p and p[1]), None)
    if first is None:
        return
    n0, c0 = first
    acc = [n0 * start_obs * cdf(c0, b) for b in bounds]
    total = n0 * start_obs * mean(c0)
    gap = False
    for i, ts in enumerate(times):
        p = per_interval[i]
        if p is None:
            gap = True
            continue
        if gap and i:  # restarted during the gap: the histogram starts over
            acc, total = [0.0] * len(bounds), 0.0
        gap = False
        n, comps = p
        if i and n and comps:
            for j, b in enumerate(bounds):
                acc[j] += n * cdf(comps, b)
            total += n * mean(comps)
        counts = [round(a) for a in acc]
        for j in range(1, len(counts)):  # cumulative
            counts[j] = max(counts[j], counts[j - 1])
        rec.histogram(name, ts, bounds, counts, round(total, 4), labels)


def engine_series(rec, case, states, times, rng):
    """The engine's series; `replicas` (a list of {model, load}) serves several models."""
    if restarts(case):  # Prometheus' own series for the target: 0 for a failed scrape
        eng = ENGINES[case["engine"]]
        target = {"instance": "%s:%d" % (case["host"], eng["port"]), "job": eng["job"]}
        for ts, st in zip(times, states):
            rec.gauge("up", ts, 1 if st["up"] else 0, target)
    for rep in case.get("replicas") or [{}]:
        c = dict(case, model=rep.get("model", case["model"]))
        sts = [dict(st, load=dict(st["load"], **(rep.get("load") or {}))) for st in states]
        _engine_series(rec, c, sts, times, rng)
    http_series(rec, case, states, times)


def http_series(rec, case, states, times):
    """The API server's `http_requests_total{handler,method,status}` (one series per status), for a
    case whose load sets `http_5xx_rps`: requests answered 5xx by the API server before the engine
    got them (an exception in request preprocessing), which no engine counter sees."""
    eng = ENGINES[case["engine"]]
    if not eng.get("http_rows") or not any("http_5xx_rps" in st["load"] for st in states):
        return
    series = [engine_state(case, st["load"]) if st["up"] else None for st in states]
    for qty, status in eng["http_rows"]:
        labels = {"handler": case.get("http_handler", "/v1/chat/completions"), "method": "POST",
                  "status": status, "instance": "%s:%d" % (case["host"], eng["port"]), "job": eng["job"]}
        vals = [None if s is None else s.get(qty, 0.0) for s in series]
        first = next((v for v in vals if v is not None), None)
        if first is not None:
            emit_counter(rec, "counter", "http_requests", labels, times, vals, first * UPTIME_S)


def _engine_series(rec, case, states, times, rng):
    eng = ENGINES[case["engine"]]
    base = dict(eng["labels"](case), instance="%s:%d" % (case["host"], eng["port"]), job=eng["job"])
    series = [engine_state(case, st["load"]) if st["up"] else None for st in states]
    max_len = case.get("max_model_len", 32768)
    for row in eng["rows"]:
        qty, kind, name, extra = row[0], row[1], row[2], row[3]
        if kind == "hist":
            labels = dict(base, **(row[4] if len(row) > 4 else {}))
            if extra == "125":
                bounds = buckets_125(max_len)
            elif extra in ("tgi_input", "tgi_total"):
                top = case["max_input_tokens"] if extra == "tgi_input" else case["max_total_tokens"]
                bounds = [top / 100 * (x + 1) for x in range(100)]
            else:
                bounds = extra
            per = []
            for s in series:
                if s is None:
                    per.append(None)
                    continue
                spec = s.get(DIST_KEY.get(qty, qty))
                rate = s.get(obs_rate(case, qty), 0.0)
                per.append((rate * STEP, components(spec)) if spec else (0, None))
            if any(p and p[1] for p in per):
                emit_histogram(rec, name, labels, times, bounds, per, UPTIME_S / STEP)
            continue
        labels = dict(base, **extra)
        vals = []
        for s in series:
            v = None if s is None else s.get(qty)
            if isinstance(v, tuple):  # (ratio key, scale): a gauge derived from another
                key, scale = v
                r = s.get(key, 1.0 - s.get("kv", 0.0)) if key == "kv_free" else s.get(key, 0.0)
                v = r * scale
            vals.append(v)
        if all(v is None for v in vals):
            continue
        if kind in ("counter", "plain"):
            if eng.get("skip_zero_counters") and not any(vals):
                continue
            first = next(v for v in vals if v is not None)
            emit_counter(rec, kind, name, labels, times, vals, first * UPTIME_S)
        else:
            integer = qty in ("running", "waiting", "scheduled", "trt_waiting", "paused", "gen_reqs",
                              "context_reqs", "kv_used", "kv_free", "used_tokens", "swapped")
            ratio = qty == "kv"
            noise = 0.0 if qty in ("kv_capacity", "max_batch", "kv_max", "kv_block", "cuda_graph") \
                else case.get("gauge_noise", 0.04)
            emit_gauge(rec, name, labels, times, vals, rng, noise if not ratio else noise / 4,
                       hi=1.0 if ratio else None, integer=integer)
    if case["engine"] == "vllm" and case.get("cache_config"):
        cfg = dict(case["cache_config"], engine="0")
        for ts, s in zip(times, series):
            if s is not None:
                rec.gauge("vllm:cache_config_info", ts, 1, {**cfg, "instance": base["instance"],
                                                             "job": base["job"]})


def dcgm_series(rec, case, states, times, rng):
    g = case.get("gpu_hw")
    if not g:
        return
    host = case["host"]
    for i in range(g.get("count", 1)):
        labels = {"gpu": str(i), "UUID": "GPU-%08x-0000-4000-8000-%012x" % (zlib.crc32(host.encode()), i),
                  "Hostname": host, "modelName": g["model"], "device": "nvidia%d" % i,
                  "pci_bus_id": "00000000:%02X:00.0" % (0x18 + i), "DCGM_FI_DRIVER_VERSION": "570.124.06",
                  "instance": "%s:9400" % host, "job": "dcgm"}
        for qty, field in DCGM_FIELDS:
            vals = []
            for st in states:
                gs = dict(GPU_DEFAULTS, **st["gpu"])
                per_gpu = gs.get("per_gpu", {}).get(i, {})
                gs.update(per_gpu)
                total = g["mem_mib"]
                used = gs.get("fb_used_mib", gs["fb_used_ratio"] * total)
                reserved = g.get("reserved_mib", round(total * 0.005))
                gs.setdefault("fb_used", used)
                gs.setdefault("fb_reserved", reserved)
                gs.setdefault("fb_free", max(total - used - reserved, 0))
                gs.setdefault("sm_clock", g.get("sm_clock"))
                gs.setdefault("mem_clock", g.get("mem_clock"))
                gs.setdefault("power", g.get("power_busy", 300) * (0.35 + 0.65 * gs["util"] / 100))
                gs.setdefault("gr_active", gs["util"] / 100 * 0.85)
                gs.setdefault("tensor", gs["gr_active"] * 0.3)
                gs.setdefault("dram", gs["gr_active"] * 0.5)
                gs.setdefault("mem_copy", gs["dram"] * 100)
                vals.append(gs.get(qty))
            if all(v is None for v in vals):
                continue
            ratio = field.startswith("DCGM_FI_PROF_") and "PCIE" not in field
            noise = 0.0 if qty in ("xid", "fb_reserved", "mem_clock") else (0.005 if qty.startswith("fb") else 0.03)
            emit_gauge(rec, field, labels, times, vals, rng, noise, hi=1.0 if ratio else
                       (100.0 if qty in ("util", "mem_copy") else None),
                       integer=qty in ("fb_used", "fb_free", "fb_reserved", "sm_clock", "mem_clock", "xid", "util",
                                       "temp", "mem_temp"))


def node_series(rec, case, states, times, rng):
    h0 = dict(HOST_DEFAULTS, **(case.get("host_hw") or {}))
    if h0.get("absent"):
        return
    n = h0["cpus"]
    base = {"instance": "%s:9100" % case["host"], "job": "node"}
    idle = [[0.0] * n for _ in range(4)]
    cum = {m: [UPTIME_S * 10 * (1.0 if m == "idle" else 0.1)] * n for m in ("idle", "user", "system", "iowait")}
    psi = UPTIME_S * 10 * 0.01
    rows = {m: [] for m in cum}
    psi_rows, load_rows = [], []
    for k, st in enumerate(states):
        hs = dict(h0, **st["cpu"])
        # per-core busy shares: `pegged` cores at 100 %, the rest at `busy`
        pegged = hs.get("pegged", 0)
        for c in range(n):
            busy = 0.98 if c < pegged else max(0.0, min(1.0, hs["busy"] * (1 + rng.gauss(0, 0.05))))
            io = min(hs["iowait"], 1 - busy)
            if k:
                cum["user"][c] += STEP * busy * 0.8
                cum["system"][c] += STEP * busy * 0.2
                cum["iowait"][c] += STEP * io
                cum["idle"][c] += STEP * (1 - busy - io)
            for m in cum:
                rows[m].append((times[k], c, round(cum[m][c], 2)))
        if k:
            psi += STEP * hs["psi"]
        psi_rows.append((times[k], round(psi, 3)))
        load_rows.append((times[k], hs.get("load1", n * hs["busy"] + pegged)))
    for m in ("idle", "user", "system", "iowait"):
        for ts, c, v in rows[m]:
            rec.counter("node_cpu_seconds", ts, v, dict(base, cpu=str(c), mode=m))
    for ts, v in psi_rows:
        rec.counter("node_pressure_cpu_waiting_seconds", ts, v, base)
    emit_gauge(rec, "node_load1", base, [t for t, _ in load_rows], [v for _, v in load_rows], rng, 0.03)


# ----------------------------------------------------------------------------------------------
# A case: recording + case file


def build(case):
    rng = random.Random(zlib.crc32(case["id"].encode()))
    times = [START + STEP * k for k in range(SCRAPES)]
    # the state of interval (k-1, k] is the one in force at its start
    states = [merged(case, STEP * max(k - 1, 0)) for k in range(SCRAPES)]
    rec = Rec()
    if case["engine"] != "none":
        engine_series(rec, case, states, times, rng)
    dcgm_series(rec, case, states, times, rng)
    node_series(rec, case, states, times, rng)
    return rec


CASE_ENGINE = {"vllm": "vllm", "vllm-v0": "vllm", "sglang": "sglang", "triton": "trtllm",
               "llamacpp": "llamacpp", "tgi": "tgi"}


# What llm-doctor takes as a serve command line; other engines' commands stay in the notes.
SERVE_COMMANDS = ("vllm serve", "python -m sglang.launch_server", "tritonserver", "llama-server",
                  "text-generation-launcher")
# Report facts under the catalog's names (rules/catalog.yaml); the rest stay in ground_truth.
FACT_NAMES = {"mem_fraction_static": "gpu_memory_utilization", "n_ctx": "max_model_len",
              "vllm_trace_function": "trace_function", "gpu_share": "gpu_layers_offloaded_ratio"}


def catalog_facts():
    with open(Path(__file__).resolve().parents[2] / "rules" / "catalog.yaml") as fh:
        return {f["name"] for f in yaml.safe_load(fh)["facts"]}


def serve_command(args):
    """The command line without leading VAR=value settings, if it is a known serve command."""
    words = args.split()
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]
    return any(" ".join(words).startswith(c) for c in SERVE_COMMANDS)


def split_facts(facts):
    """(catalog facts, the report's other facts)."""
    known, other = {}, {}
    names = catalog_facts()
    for k, v in (facts or {}).items():
        name = FACT_NAMES.get(k, k)
        if name == "trace_function":
            v = bool(v)
        (known if name in names else other)[name] = v
    if "n_gpu_layers" in known and (facts or {}).get("model_layers"):
        known["gpu_layers_offloaded_ratio"] = round(known["n_gpu_layers"] / facts["model_layers"], 4)
    return known, other


def slo_names():
    with open(Path(__file__).resolve().parents[2] / "rules" / "playbooks" / "symptoms.yaml") as fh:
        return {s["id"] for s in yaml.safe_load(fh)["slos"]}


def case_slos(case):
    """The entry's objectives as the case file writes them (objective -> float), checked against the
    playbooks' objective names; and the paragraph its `slos_why` adds to the notes. An entry without
    `slos` gets neither (its case is judged by the product's defaults)."""
    slos = case.get("slos") or {}
    if not slos:
        assert not case.get("slos_why"), "%s: slos_why without slos" % case["id"]
        return {}, ""
    unknown = set(slos) - slo_names()
    assert not unknown, "%s: unknown objectives %s" % (case["id"], sorted(unknown))
    why = " ".join((case.get("slos_why") or "").split())
    assert why, "%s: slos without slos_why" % case["id"]
    para = textwrap.fill("Objectives (slos): " + why, width=110, break_long_words=False,
                         break_on_hyphens=False)
    return {k: float(v) for k, v in slos.items()}, para + "\n"


def case_file(case):
    made = ["# made from: field report %s (%s)" % (case["report"], case["source"]),
            "# transcribed by scripts/corpus/reports.py from scripts/corpus/reports.yaml entry %s"
            % case["id"],
            "python3 scripts/corpus/reports.py --only %s" % case["id"]]
    out = {"id": case["id"], "family": "report", "engine": CASE_ENGINE[case["engine"]],
           "recording": case["id"] + ".om.gz"}
    notes = case["notes"].rstrip() + "\n"
    slos, slos_why = case_slos(case)
    if case.get("engine_args"):
        if serve_command(case["engine_args"]):
            out["engine_args"] = case["engine_args"]
        else:
            notes += "Serve command as reported (not one llm-doctor reads): %s\n" % case["engine_args"]
    facts, other_facts = split_facts(case.get("facts"))
    if facts:
        out["facts"] = facts
    if case.get("signals"):
        out["signals"] = case["signals"]
    out["window"] = "10m"
    if slos:
        out["slos"] = slos
    out["made_by"] = "\n".join(made) + "\n"
    out["label"] = case["label"]
    gt = {"report": case["report"], "label_confidence": case["confidence"]}
    gt.update(case.get("ground_truth") or {})
    if other_facts:
        gt["report_facts"] = other_facts
    gt["quotes"] = case["quotes"]
    out["ground_truth"] = gt
    out["notes"] = notes + slos_why
    head = "# %s\n" % case["title"]
    return head + yaml.safe_dump(out, sort_keys=False, allow_unicode=True, width=100)


def _block_strings(dumper, data):
    """Multi-line strings (made_by, notes) as YAML literal blocks."""
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


yaml.SafeDumper.add_representer(str, _block_strings)


def load_cases(path=DATA):
    with open(path) as fh:
        data = yaml.safe_load(fh)
    defaults = data.get("defaults", {})
    cases = []
    for c in data["cases"]:
        case = dict(defaults)
        case.update(c)
        cases.append(case)
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), "duplicate ids"
    return cases


def write(case):
    OUT.mkdir(parents=True, exist_ok=True)
    build(case).write(OUT / (case["id"] + ".om.gz"))
    (OUT / (case["id"] + ".yaml")).write_text(case_file(case))


# ----------------------------------------------------------------------------------------------
# Check: parse each recording; counters never decrease; buckets cumulative; quantiles as given


def increase(samples):
    """A counter's increase over the samples, as Prometheus counts it across a reset."""
    total = 0.0
    for (_, a), (_, b) in zip(samples, samples[1:]):
        total += b - a if b >= a else b
    return total


def window_hist(series, name, q):
    """histogram_quantile over the whole recording (increase of each bucket, summed over series)."""
    inc = {}
    for (n, labels), samples in series.items():
        if n != name + "_bucket":
            continue
        le = float(dict(labels)["le"].replace("Inf", "inf"))
        inc[le] = inc.get(le, 0.0) + increase(samples)
    if not inc:
        return None
    return prom_quantile(q, list(inc.items()))


def check(case):
    problems = []
    path = OUT / (case["id"] + ".om.gz")
    series = parse_om(path)
    types = {}
    import gzip
    with gzip.open(path, "rt") as fh:
        for line in fh:
            if line.startswith("# TYPE"):
                _, _, n, t = line.split()
                types[n] = t
    for (name, labels), samples in series.items():
        ts = [t for t, _ in samples]
        if ts != sorted(ts):
            problems.append("%s not in time order" % name)
        fam = name
        for suf in ("_total", "_bucket", "_sum", "_count"):
            if name.endswith(suf) and name[: -len(suf)] in types:
                fam = name[: -len(suf)]
        kind = types.get(fam)
        vals = [v for _, v in samples]
        # a counter may start over only after a gap in its samples (the process restarted)
        if kind in ("counter", "histogram", "unknown") and any(
                b < a and tb - ta <= STEP for (ta, a), (tb, b) in zip(samples, samples[1:])):
            problems.append("%s%s decreases" % (name, dict(labels)))
        if kind == "gauge" and any(v < 0 or math.isnan(v) for v in vals):
            problems.append("%s negative" % name)
        if name.endswith(("kv_cache_usage_perc", "token_usage", "gpu_cache_usage_perc")) and max(vals) > 1:
            problems.append("%s above 1" % name)
        if name.startswith("DCGM_FI_PROF_") and "PCIE" not in name and max(vals) > 1:
            problems.append("%s above 1" % name)
        if name in ("DCGM_FI_DEV_GPU_UTIL",) and max(vals) > 100:
            problems.append("%s above 100" % name)
    # buckets cumulative at every scrape
    groups = {}
    for (name, labels), samples in series.items():
        if name.endswith("_bucket"):
            d = dict(labels)
            le = float(d.pop("le").replace("Inf", "inf"))
            groups.setdefault((name, tuple(sorted(d.items()))), []).append((le, samples))
    for key, rows in groups.items():
        rows.sort()
        for k in range(len(rows[0][1])):
            col = [r[1][k][1] for r in rows]
            if any(b < a for a, b in zip(col, col[1:])):
                problems.append("%s buckets not cumulative" % key[0])
                break
    # quantiles: the recording's histogram_quantile vs the expected mixture quantile
    results = []
    eng = ENGINES.get(case["engine"])
    if eng and case["engine"] != "none":
        states = [merged(case, STEP * k) for k in range(SCRAPES - 1)]
        for row in eng["rows"]:
            qty, kind, name = row[0], row[1], row[2]
            if kind != "hist" or qty in ("prompt_len", "output_len"):
                continue
            mix = []
            for st in states:
                if not st["up"]:
                    continue
                s = engine_state(case, st["load"])
                if s.get(qty):
                    mix.append((s.get(obs_rate(case, qty), 0) * STEP, components(s[qty])))
            mix = [m for m in mix if m[0] > 0]
            if sum(n for n, _ in mix) < 5:  # too few observations in the run to have quantiles
                continue
            for q in (0.5, 0.99):
                want = quantile(mix, q)
                got = window_hist(series, name, q)
                results.append((name, q, want, got))
                bounds = [float(b) for b in row[3]]
                # tolerance: the buckets holding the quantiles a little either side of q (bucket
                # interpolation, integer counts, and the gap of a bimodal mixture)
                w_lo, w_hi = quantile(mix, q - 0.03), quantile(mix, min(q + 0.03, 0.995))
                lo = max([b for b in bounds if b < w_lo] or [0.0])
                hi = min([b for b in bounds if b >= w_hi] or [INF])
                if got is None or not (lo * 0.999 <= got <= hi * 1.001):
                    problems.append("%s q%.2f: want %.4g got %s (bucket %g..%g)" % (name, q, want, got, lo, hi))
    return problems, results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    cases = [c for c in load_cases() if not args.only or c["id"] == args.only]
    if not cases:
        sys.exit("no such case")
    bad = 0
    for case in cases:
        if not args.check:
            write(case)
        problems, results = check(case)
        status = "ok" if not problems else "FAIL"
        print("%-55s %s" % (case["id"], status))
        if args.verbose:
            for name, q, want, got in results:
                print("    %-45s q%.2f want %.4g got %s" % (name, q, want, "%.4g" % got if got else got))
        for p in problems:
            print("    " + p)
        bad += bool(problems)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
