#!/usr/bin/env python3
"""Open-loop load for llama-server: Poisson arrivals at a set rate, whatever the completions do.

Each request is a streaming POST /completion (or /v1/completions) with a prompt of a set token
length (random words from a list the Gemma tokenizer reads as one token each, so every prompt is
unique and no prefix cache helps) and a fixed n_predict (ignore_eos, so outputs have that length
unless the context cuts them). Per request, measured on the client: TTFT (first streamed token),
e2e, output tokens, HTTP status, refused (non-200), cut at the context limit (truncated, or fewer
tokens than asked). Standard library only.

    python3 llamacpp_load.py --port 8080 --rate 1.5 --duration 90 --prompt-tokens 200 \
        --n-predict 64 --out run.json

--prompt-tokens takes N or LO-HI (uniform). --burst AT:N adds N requests sent at once AT seconds
after the start (marked `burst` in the records). Arrivals stop at --duration; requests still open
--drain seconds later are abandoned (counted as unfinished; the connection is closed, which makes
llama-server cancel the task).
"""

import argparse
import http.client
import json
import random
import socket
import sys
import threading
import time

WORDS = (
    "the of and to in is was for on that with as by at from his her an are which be this were had "
    "or not have one their all but been has more who also its they first new after two other some "
    "time when only into over most year than can may would about such people during city world "
    "these used state many through between under known while where before later both three well "
    "since part however early series group several until because including around each him still "
    "use war life high them against small made then last called form could four long found said "
    "area should work south north school house water river music church family line game team "
    "film book power light night water king road name home left right black white green red blue"
).split()
WORDS = sorted(set(WORDS))


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def make_prompt(rng, n):
    # The server adds BOS: n words -> n+1 prompt tokens.
    return " ".join(rng.choice(WORDS) for _ in range(max(1, n - 1)))


def one_request(args, idx, prompt, n_prompt, t_sched, results, lock, burst=False):
    rec = {"i": idx, "t_sched": t_sched, "n_prompt_words": n_prompt, "status": None, "ttft": None,
           "e2e": None, "tokens": 0, "truncated": False, "stop_type": None, "error": None,
           "finished": False}
    if burst:
        rec["burst"] = True
    t0 = time.time()
    rec["t_start"] = t0
    if args.api == "v1":
        path = "/v1/completions"
        body = {"prompt": prompt, "max_tokens": args.n_predict, "stream": True, "ignore_eos": True,
                "temperature": 0.8}
    else:
        path = "/completion"
        body = {"prompt": prompt, "n_predict": args.n_predict, "stream": True, "ignore_eos": True,
                "cache_prompt": False}
    conn = None
    try:
        conn = http.client.HTTPConnection(args.host, args.port, timeout=args.request_timeout)
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        rec["status"] = resp.status
        if resp.status != 200:
            txt = resp.read().decode(errors="replace")
            rec["error"] = txt[:300]
            rec["e2e"] = time.time() - t0
            rec["finished"] = True
        else:
            last = None
            while True:
                line = resp.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                try:
                    obj = json.loads(data)
                except ValueError:
                    continue
                if "error" in obj:
                    rec["error"] = str(obj["error"])[:300]
                    break
                if args.api == "v1":
                    ch = (obj.get("choices") or [{}])[0]
                    text = ch.get("text", "")
                    if text or ch.get("finish_reason") is None:
                        if rec["ttft"] is None and text:
                            rec["ttft"] = time.time() - t0
                        if text:
                            rec["tokens"] += 1
                    if ch.get("finish_reason"):
                        rec["stop_type"] = ch.get("finish_reason")
                    last = obj
                else:
                    if obj.get("content") or obj.get("tokens"):
                        if rec["ttft"] is None:
                            rec["ttft"] = time.time() - t0
                    if obj.get("stop"):
                        rec["tokens"] = obj.get("tokens_predicted", rec["tokens"])
                        rec["truncated"] = bool(obj.get("truncated"))
                        rec["stop_type"] = obj.get("stop_type")
                        rec["tokens_evaluated"] = obj.get("tokens_evaluated")
                        # The server's own prompt time: TTFT less it is the wait for a slot
                        # (plus HTTP), which tells a queue from a slow prefill.
                        tim = obj.get("timings") or {}
                        if "prompt_ms" in tim:
                            rec["server_prompt_s"] = tim["prompt_ms"] / 1000.0
                            rec["server_predicted_s"] = tim.get("predicted_ms", 0.0) / 1000.0
                        last = obj
                        break
                    rec["tokens"] = obj.get("tokens_predicted", rec["tokens"] + 1)
            rec["e2e"] = time.time() - t0
            rec["finished"] = last is not None
    except (socket.timeout, OSError, http.client.HTTPException) as exc:
        rec["error"] = "%s: %s" % (type(exc).__name__, exc)
        rec["e2e"] = time.time() - t0
    finally:
        if conn is not None:
            conn.close()
    # Cut at the context limit: the server says truncated, or it stopped before n_predict.
    rec["cut"] = bool(rec["status"] == 200 and rec["finished"] and
                      (rec["truncated"] or rec["tokens"] < args.n_predict))
    with lock:
        results.append(rec)


def summarize(args, results, t_begin, t_arrivals_end, t_end, abandoned):
    ok = [r for r in results if r["status"] == 200 and r["finished"] and not r["error"]]
    by_status = {}
    for r in results:
        key = str(r["status"]) if r["status"] is not None else ("client_error")
        by_status[key] = by_status.get(key, 0) + 1
    if abandoned:
        by_status["unfinished"] = abandoned
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    e2e = [r["e2e"] for r in ok]
    toks = sum(r["tokens"] for r in results if r["status"] == 200)
    # Served rate: completions during the arrival window (steady-state throughput), and overall.
    done_in_window = [r for r in ok if r["t_start"] + r["e2e"] <= t_arrivals_end]
    n_sent = len(results) + abandoned
    t_last = max([r["t_start"] + r["e2e"] for r in ok] or [t_end])
    tpot = [(r["e2e"] - r["ttft"]) / (r["tokens"] - 1) for r in ok
            if r["ttft"] is not None and r["tokens"] > 1]
    s = {
        "offered_rps_target": args.rate,
        "duration_s": round(t_arrivals_end - t_begin, 2),
        "sent": n_sent,
        "offered_rps": round(n_sent / (t_arrivals_end - t_begin), 3),
        "completed_ok": len(ok),
        "served_rps": round(len(ok) / max(t_arrivals_end - t_begin, t_last - t_begin), 3),
        "served_rps_in_window": round(len(done_in_window) / (t_arrivals_end - t_begin), 3),
        "by_status": by_status,
        "errors": sum(v for k, v in by_status.items() if k != "200"),
        "cut_at_context": sum(1 for r in results if r.get("cut")),
        "ttft_p50_s": pct(ttft, 0.5), "ttft_p90_s": pct(ttft, 0.9), "ttft_p99_s": pct(ttft, 0.99),
        "ttft_max_s": max(ttft) if ttft else None,
        "e2e_p50_s": pct(e2e, 0.5), "e2e_p99_s": pct(e2e, 0.99),
        "tpot_p50_s": pct(tpot, 0.5), "tpot_p99_s": pct(tpot, 0.99),
        "output_tokens": toks,
        "output_tokens_per_s": round(toks / (t_end - t_begin), 2),
        "n_predict": args.n_predict, "prompt_tokens": args.prompt_tokens,
    }
    # Where the server said how long each prompt took (the /completion API): the wait before it.
    waits = [r["ttft"] - r["server_prompt_s"] for r in ok
             if r["ttft"] is not None and r.get("server_prompt_s") is not None]
    if waits:
        s.update({"wait_p50_s": pct(waits, 0.5), "wait_p99_s": pct(waits, 0.99),
                  "n_wait_over_1s": sum(1 for w in waits if w > 1.0)})
    bursts = [r for r in ok if r.get("burst")]
    if any(r.get("burst") for r in results):
        steady = [r["ttft"] for r in ok if not r.get("burst") and r["ttft"] is not None]
        burst_ttft = [r["ttft"] for r in bursts if r["ttft"] is not None]
        s.update({
            "burst_sent": sum(1 for r in results if r.get("burst")),
            "burst_ttft_p50_s": pct(burst_ttft, 0.5), "burst_ttft_max_s": max(burst_ttft or [0]),
            "steady_ttft_p50_s": pct(steady, 0.5), "steady_ttft_p99_s": pct(steady, 0.99),
        })
    for k, v in list(s.items()):
        if isinstance(v, float):
            s[k] = round(v, 4)
    return s


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--rate", type=float, required=True, help="arrivals per second (Poisson)")
    ap.add_argument("--duration", type=float, required=True, help="seconds of arrivals")
    ap.add_argument("--prompt-tokens", default="200", help="N or LO-HI")
    ap.add_argument("--n-predict", type=int, default=64)
    ap.add_argument("--api", choices=["completion", "v1"], default="completion")
    ap.add_argument("--drain", type=float, default=30.0)
    ap.add_argument("--request-timeout", type=float, default=300.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--burst", help="AT:N, N requests at once AT seconds after the start")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    burst_at, burst_n = (float(args.burst.split(":")[0]), int(args.burst.split(":")[1])) \
        if args.burst else (None, 0)

    if "-" in args.prompt_tokens:
        lo, hi = (int(x) for x in args.prompt_tokens.split("-"))
    else:
        lo = hi = int(args.prompt_tokens)
    rng = random.Random(args.seed)
    results, lock, threads = [], threading.Lock(), []
    t_begin = time.time()
    next_t = t_begin + rng.expovariate(args.rate)
    idx = 0
    burst_rng = random.Random(args.seed + 1)  # the Poisson arrivals stay those of the seed
    burst_t = t_begin + burst_at if burst_at is not None else None

    def send(t_sched, r, burst):
        nonlocal idx
        n = r.randint(lo, hi)
        prompt = make_prompt(r, n)
        th = threading.Thread(target=one_request,
                              args=(args, idx, prompt, n, t_sched - t_begin, results, lock, burst),
                              daemon=True)
        th.start()
        threads.append(th)
        idx += 1

    while next_t < t_begin + args.duration:
        if burst_t is not None and burst_t <= next_t:
            now = time.time()
            if burst_t > now:
                time.sleep(burst_t - now)
            for _ in range(burst_n):
                send(burst_t, burst_rng, True)
            burst_t = None
        now = time.time()
        if next_t > now:
            time.sleep(next_t - now)
        send(next_t, rng, False)
        next_t += rng.expovariate(args.rate)
    # A burst due after the last steady arrival is still sent (before this, it was lost:
    # llamacpp-fresh10-burst-np2 got no burst).
    if burst_t is not None and burst_t < t_begin + args.duration:
        now = time.time()
        if burst_t > now:
            time.sleep(burst_t - now)
        for _ in range(burst_n):
            send(burst_t, burst_rng, True)
    t_arrivals_end = t_begin + args.duration
    if time.time() < t_arrivals_end:
        time.sleep(t_arrivals_end - time.time())
    deadline = time.time() + args.drain
    for th in threads:
        th.join(max(0.0, deadline - time.time()))
    with lock:
        done = list(results)
    abandoned = idx - len(done)
    t_end = time.time()
    summary = summarize(args, done, t_begin, t_arrivals_end, t_end, abandoned)
    summary["t_begin"] = t_begin
    summary["t_arrivals_end"] = t_arrivals_end
    summary["t_end"] = t_end
    with open(args.out, "w") as fh:
        json.dump({"summary": summary, "requests": sorted(done, key=lambda r: r["i"])}, fh, indent=1)
    print(json.dumps(summary))
    sys.stdout.flush()
    # Abandoned threads are daemons: exiting closes their sockets.
    return 0


if __name__ == "__main__":
    sys.exit(main())
