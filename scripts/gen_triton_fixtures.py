#!/usr/bin/env python3
"""Triton recordings of a four-model TensorRT-LLM repository (fixtures/triton_ensemble_*.om.gz).

The inflight_batcher_llm repository: clients call `ensemble`, which calls `preprocessing`
(tokenizer), `tensorrt_llm` (the engine, decoupled: one response per generated token) and
`postprocessing` (detokenizer, once per streamed response). Triton counts requests and times for
each of the four models (reference/engine-metrics.md §4.1), so a sum over models counts a
request many times over; these recordings are where llm-doctor must count it once.

Metric names and labels are those of §4.1 (Triton core, counters without `_total`, hence
`unknown` in OpenMetrics as Triton's text exposition has them) and §4.2 (TensorRT-LLM backend
gauges and token histograms, on the tensorrt_llm model). `nv_inference_request_failure` has
no series in the healthy recording: Triton creates it at a model's first failure.

Scenarios (4 client requests per second, 200 output tokens each, streamed):
* triton_ensemble_healthy: the detokenizer takes 0.3 ms per response, 6% of request time.
* triton_ensemble_detokenizer_bottleneck: one postprocessing instance (Python backend, one
  core) takes 10 ms per response, queueing included: 2 s of every request, the first token
  arrives late and the GPU waits. A few requests are rejected, so failures have series there.

Run from the repository root: python3 scripts/gen_triton_fixtures.py
"""

import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "corpus"))
from openmetrics import Recording  # noqa: E402

START = 1796083200  # the first scrape, as scripts/gen_fixtures.py's recordings
STEP = 15
SAMPLES = 41  # ten minutes
UPTIME = 3600  # counters start where an hour of the same load left them
RPS = 4.0
OUTPUT_TOKENS = 200
PROMPT_TOKENS = 600
INSTANCE = {"job": "triton", "instance": "gpu-node-1:8002"}
GPU_UUID = "GPU-7f3c9a10-0000-4000-8000-000000000001"
FIRST_RESPONSE_MS = [100, 500, 2000, 5000]  # Triton's default buckets
TOKEN_BUCKETS = [10, 50, 100, 500, 1000]  # the TensorRT-LLM backend's

SCENARIOS = {
    "triton_ensemble_healthy": {
        "pre_s": 0.0025,  # tokenizer per request
        "post_call_s": 0.0003,  # detokenizer per streamed response
        "engine_s": 3.0,  # tensorrt_llm per request (prefill and 200 decode steps)
        "engine_queue_s": 0.004,
        "ttft_cdf": [0.25, 0.995, 1.0, 1.0],  # at FIRST_RESPONSE_MS
        "ttft_mean_s": 0.22,
        "failures_per_s": None,  # no failure series at all
        "gpu_util": 0.78,
        "cpu_util": 0.22,
        "active": 12,
        "kv_fraction": 0.42,
        "post_pending": 0,
    },
    "triton_ensemble_detokenizer_bottleneck": {
        "pre_s": 0.0025,
        "post_call_s": 0.010,
        "engine_s": 3.0,
        "engine_queue_s": 0.004,
        "ttft_cdf": [0.0, 0.04, 0.48, 0.97],
        "ttft_mean_s": 2.3,
        "failures_per_s": {"REJECTED": 0.01},
        "gpu_util": 0.41,
        "cpu_util": 0.19,
        "active": 12,
        "kv_fraction": 0.45,
        "post_pending": 9,
    },
}


def unknown(rec, name, ts, value, labels, help_text):
    """A Triton counter: no `_total`, typed `unknown` (Recording.counter would add `_total`)."""
    rec._family(name, "unknown", help_text).append((ts, name, labels, value))


def build(cfg):
    rec = Recording()
    post_calls = OUTPUT_TOKENS  # one response per generated token
    post_per_request = post_calls * cfg["post_call_s"]
    e2e = cfg["pre_s"] + cfg["engine_s"] + post_per_request
    # Per model: calls per client request, seconds per call, queue seconds per call.
    models = {
        "ensemble": (1, e2e, 0.0001),
        "preprocessing": (1, cfg["pre_s"], 0.0001),
        "tensorrt_llm": (1, cfg["engine_s"], cfg["engine_queue_s"]),
        "postprocessing": (post_calls, cfg["post_call_s"], cfg["post_call_s"] * 0.7 if cfg["post_pending"] else 0.00005),
    }
    for i in range(SAMPLES):
        ts = START + i * STEP
        up = UPTIME + i * STEP
        requests = RPS * up
        for model, (calls, call_s, queue_s) in models.items():
            m = {"model": model, "version": "1", **INSTANCE}
            n = math.floor(requests * calls)
            unknown(rec, "nv_inference_request_success", ts, n, m, "Number of successful inference requests, all batch sizes")
            if cfg["failures_per_s"] and model == "ensemble":
                for reason in ("BACKEND", "CANCELED", "OTHER", "REJECTED"):
                    rate = cfg["failures_per_s"].get(reason, 0.0)
                    unknown(rec, "nv_inference_request_failure", ts, math.floor(rate * up), dict(m, reason=reason),
                            "Number of failed inference requests, all batch sizes")
            # The ensemble scheduler executes no backend: no executions, no compute time.
            backend = model != "ensemble"
            unknown(rec, "nv_inference_count", ts, n if backend else 0, m,
                    "Number of inferences performed (does not include cached requests)")
            unknown(rec, "nv_inference_exec_count", ts, n if backend else 0, m,
                    "Number of model executions performed (does not include cached requests)")
            us = lambda seconds: math.floor(n * seconds * 1e6 + 0.5)  # noqa: E731
            unknown(rec, "nv_inference_request_duration_us", ts, us(call_s), m,
                    "Cumulative inference request duration in microseconds (includes cached requests)")
            unknown(rec, "nv_inference_queue_duration_us", ts, us(queue_s), m,
                    "Cumulative inference queuing duration in microseconds (includes cached requests)")
            compute = max(call_s - queue_s, 0.0) if backend else 0.0
            unknown(rec, "nv_inference_compute_input_duration_us", ts, us(compute * 0.01), m,
                    "Cumulative compute input duration in microseconds (does not include cached requests)")
            unknown(rec, "nv_inference_compute_infer_duration_us", ts, us(compute * 0.97), m,
                    "Cumulative compute inference duration in microseconds (does not include cached requests)")
            unknown(rec, "nv_inference_compute_output_duration_us", ts, us(compute * 0.02), m,
                    "Cumulative inference compute output duration in microseconds (does not include cached requests)")
            pending = cfg["post_pending"] if model == "postprocessing" else 0
            rec.gauge("nv_inference_pending_request_count", ts, pending, m,
                      "Instantaneous number of pending requests awaiting execution per-model.")
        # --metrics-config histogram_latencies=true: first response of the ensemble (TTFT).
        em = {"model": "ensemble", "version": "1", **INSTANCE}
        n = math.floor(requests)
        counts = [math.floor(n * c) for c in cfg["ttft_cdf"]] + [n]
        rec.histogram("nv_inference_first_response_histogram_ms", ts, FIRST_RESPONSE_MS + [math.inf], counts,
                      math.floor(n * cfg["ttft_mean_s"] * 1000), em,
                      "Duration from request to first response in milliseconds")
        # TensorRT-LLM backend metrics, on the tensorrt_llm model.
        tm = {"model": "tensorrt_llm", "version": "1", **INSTANCE}
        for rt, v in (("active", cfg["active"]), ("context", 1), ("max", 64), ("scheduled", cfg["active"]),
                      ("waiting", 0)):
            rec.gauge("nv_trt_llm_request_metrics", ts, v, dict(tm, request_type=rt), "TRT LLM request metrics")
        max_blocks = 8192
        used = math.floor(max_blocks * cfg["kv_fraction"])
        for bt, v in (("fraction", used / max_blocks), ("free", max_blocks - used), ("max", max_blocks),
                      ("reused", 0), ("tokens_per", 64), ("used", used)):
            rec.gauge("nv_trt_llm_kv_cache_block_metrics", ts, v, dict(tm, kv_cache_block_type=bt),
                      "TRT LLM KV cache block metrics")
        for name, mtype, tokens, cdf in (
            ("nv_llm_input_token_len", "total_input_tokens", PROMPT_TOKENS, [0.0, 0.0, 0.02, 0.30, 0.97]),
            ("nv_llm_output_token_len", "total_output_tokens", OUTPUT_TOKENS, [0.0, 0.01, 0.10, 1.0, 1.0]),
        ):
            counts = [math.floor(n * c) for c in cdf] + [n]
            rec.histogram(name, ts, TOKEN_BUCKETS + [math.inf], counts, n * tokens,
                          dict(tm, response_metric_type=mtype), "TRT LLM response metrics")
        # Triton's own GPU and CPU gauges.
        g = {"gpu_uuid": GPU_UUID, **INSTANCE}
        rec.gauge("nv_gpu_utilization", ts, cfg["gpu_util"], g, "GPU utilization rate [0.0 - 1.0)")
        rec.gauge("nv_gpu_memory_total_bytes", ts, 85520809984, g, "GPU total memory, in bytes")
        rec.gauge("nv_gpu_memory_used_bytes", ts, 77309411328, g, "GPU used memory, in bytes")
        rec.gauge("nv_gpu_power_usage", ts, 280 + 300 * cfg["gpu_util"], g, "GPU power usage in watts")
        rec.gauge("nv_gpu_power_limit", ts, 700, g, "GPU power management limit in watts")
        rec.gauge("nv_cpu_utilization", ts, cfg["cpu_util"], INSTANCE, "CPU utilization rate [0.0 - 1.0]")
    return rec


def main():
    out = os.path.join(os.path.dirname(__file__), "..", "fixtures")
    for name, cfg in SCENARIOS.items():
        build(cfg).write(os.path.join(out, name + ".om.gz"))
        print("wrote fixtures/%s.om.gz" % name)


if __name__ == "__main__":
    main()
