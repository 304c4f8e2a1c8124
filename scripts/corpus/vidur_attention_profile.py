"""Write Vidur `attention.csv` profiles from a roofline model (stand-in for the missing measured ones).

Why: the Vidur repository's measured attention profiles (`data/profiling/compute/<dev>/<model>/
attention.csv`, 4 MiB and more each) were not available to the corpus build; its MLP and network
profiles were. Vidur's execution-time predictor needs an attention profile to train its
`attn_prefill`, `attn_decode` and `attn_kv_cache_save` regressors, so this script writes one with
the exact columns Vidur's profiler (`vidur/profiling/attention/attention_wrapper.py`) writes, filled
from a simple, documented roofline of the device instead of a measurement. Everything else in the
simulation (schedulers, KV block allocation, preemption, batching, the measured MLP and all-reduce
profiles) stays Vidur's own.

The model (per transformer layer, per tensor-parallel worker, milliseconds, as Vidur's profiles):
  heads_q = n_q_head / TP, heads_kv = ceil(n_kv_head / TP), d = n_embd / n_q_head
  prefill (batch 1, chunk c tokens, kv_cache_size k tokens already cached, causal):
      flops = 4 * d * heads_q * c * (k + (c + 1) / 2)          (QK^T and PV, 2 flops per MAC)
      bytes = 2 (K,V) * 2 B * d * heads_kv * (k + c)           (read the whole KV once)
      t = max(flops / (peak * 0.5), bytes / (bw * 0.7)) + 0.02 ms launch overhead
  decode (batch b, each with k cached tokens, one query token each):
      bytes = b * k * 2 * 2 B * d * heads_kv                   (KV read, the bound)
      flops = 4 * d * heads_q * b * k
      t = max(bytes / (bw * 0.7), flops / (peak * 0.5)) + 0.015 ms
  kv-cache save (num_tokens = max(chunk, batch)): num_tokens * 2 * 2 B * d * heads_kv written,
      t = bytes / (bw * 0.7) + 0.005 ms
Devices (dense bf16 peak, HBM bandwidth): A100 312 TFLOP/s, 2.0 TB/s; H100 990 TFLOP/s,
3.35 TB/s; A40 150 TFLOP/s, 0.7 TB/s. Achievable fractions: 50 % of peak compute, 70 % of
bandwidth. `kv_cache_size` has the profiler's meaning (tokens cached before this step).

Usage: vidur_attention_profile.py --data-dir /work/cache/vidur-data/data --device a100 \
           --model meta-llama/Meta-Llama-3-8B --vidur-model meta-llama/Llama-3-8B
"""

import argparse
import math
import os

import pandas as pd

DEVICES = {  # name: (peak flop/s, bandwidth byte/s)
    "a100": (312e12, 2.0e12),
    "h100": (990e12, 3.35e12),
    "a40": (150e12, 0.7e12),
}
COMPUTE_EFF = 0.5
BW_EFF = 0.7
BLOCK_SIZE = 16
BACKEND = "ROOFLINE"


def chunk_grid(max_len):
    """Prefill chunk sizes: fine at the small end, coarser above."""
    sizes = list(range(32, 513, 32)) + list(range(576, 2049, 64)) + list(range(2304, max_len + 1, 256))
    return [s for s in sizes if s <= max_len]


def kv_grid(max_len):
    return [0, 16, 64, 128] + list(range(256, max_len + 1, 256))


def batch_grid(max_batch):
    sizes = list(range(1, 33)) + list(range(40, 129, 8)) + list(range(144, max_batch + 1, 16))
    return [b for b in sizes if b <= max_batch]


def prefill_ms(dev, d, hq, hkv, c, k):
    peak, bw = DEVICES[dev]
    flops = 4.0 * d * hq * c * (k + (c + 1) / 2.0)
    nbytes = 2 * 2 * d * hkv * (k + c)
    return max(flops / (peak * COMPUTE_EFF), nbytes / (bw * BW_EFF)) * 1e3 + 0.02


def decode_ms(dev, d, hq, hkv, b, k):
    peak, bw = DEVICES[dev]
    nbytes = b * k * 2 * 2 * d * hkv
    flops = 4.0 * d * hq * b * k
    return max(nbytes / (bw * BW_EFF), flops / (peak * COMPUTE_EFF)) * 1e3 + 0.015


def kv_save_ms(dev, d, hkv, n):
    _, bw = DEVICES[dev]
    return n * 2 * 2 * d * hkv / (bw * BW_EFF) * 1e3 + 0.005


def stat_cols(prefix, value):
    return {f"time_stats.{prefix}.{s}": value for s in ("min", "max", "mean", "median")} | {
        f"time_stats.{prefix}.std": 0.0
    }


def rows_for(dev, n_embd, n_q, n_kv, tp, max_len, max_batch):
    hq, hkv, d = n_q // tp, math.ceil(n_kv / tp), n_embd // n_q
    base = dict(n_embd=n_embd, n_q_head=n_q, n_kv_head=n_kv, block_size=BLOCK_SIZE,
                num_tensor_parallel_workers=tp, max_model_len=max_len, attention_backend=BACKEND)
    for c in chunk_grid(max_len):
        for k in kv_grid(max_len):
            if c + k > max_len:
                continue
            t = prefill_ms(dev, d, hq, hkv, c, k)
            yield base | dict(batch_size=1, prefill_chunk_size=c, kv_cache_size=k, is_prefill=True) \
                | stat_cols("attn_prefill", t) | stat_cols("attn_kv_cache_save", kv_save_ms(dev, d, hkv, c))
    for b in batch_grid(max_batch):
        for k in kv_grid(max_len):
            if k == 0:
                continue
            t = decode_ms(dev, d, hq, hkv, b, k)
            yield base | dict(batch_size=b, prefill_chunk_size=0, kv_cache_size=k, is_prefill=False) \
                | stat_cols("attn_decode", t) | stat_cols("attn_kv_cache_save", kv_save_ms(dev, d, hkv, b))


def write_profile(data_dir, device, model_dir, n_embd, n_q, n_kv, max_len, max_batch=256, tps=(1, 2, 4, 8)):
    rows = []
    for tp in tps:
        if n_q % tp == 0:
            rows.extend(rows_for(device, n_embd, n_q, n_kv, tp, max_len, max_batch))
    path = os.path.join(data_dir, "profiling", "compute", device, model_dir, "attention.csv")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--device", required=True, choices=sorted(DEVICES))
    ap.add_argument("--model", required=True, help="profile folder, e.g. meta-llama/Meta-Llama-3-8B")
    ap.add_argument("--vidur-model", required=True, help="Vidur model name, e.g. meta-llama/Llama-3-8B")
    ap.add_argument("--max-len", type=int, default=4096)
    args = ap.parse_args()
    from vidur.config.model_config import BaseModelConfig

    cfg = BaseModelConfig.create_from_name(args.vidur_model)
    print(write_profile(args.data_dir, args.device, args.model, cfg.embedding_dim, cfg.num_q_heads,
                        cfg.num_kv_heads, args.max_len))


if __name__ == "__main__":
    main()
