#!/usr/bin/env python3
"""Open-loop load for a vLLM OpenAI server: Poisson arrivals at a set rate, whatever it answers.

Each request is a streaming POST /v1/completions with a prompt of token ids (random ids, so no
two prompts share a prefix unless --shared-prefix says so), `max_tokens` and `ignore_eos` (a
benchmark-style load: answers run to the client's own max_tokens unless the context cuts them).
Per request, measured on the client: TTFT (first streamed token), the gaps between streamed
chunks, e2e, output tokens, HTTP status, finish reason, and whether the client gave up (--abort).
Standard library only.

    python3 vllm_load.py --port 8000 --model M --rate 0.5 --duration 120 --prompt-tokens 200-400 \
        --max-tokens 128 --out run.json

--prompt-tokens takes N or LO-HI (uniform). --shared-prefix K:F gives a share F of the requests
the same first K tokens (one prefix for the whole run, as a system prompt). --burst AT:N adds N
requests sent at once AT seconds after the start. --abort F:S makes a share F of the requests
close their connection S seconds after sending (a client that gives up). Arrivals stop at
--duration; requests still open --drain seconds later are abandoned (counted as unfinished).
--max-tokens LO-HI draws each request's max_tokens uniformly. --long-prompts F:LO-HI gives a
share F of the requests a prompt drawn from LO-HI instead (long prompts among short ones).
--accept-gzip sends Accept-Encoding: gzip (as the OpenAI SDK's httpx and browsers do) and reads
a compressed stream as it arrives.
"""

import argparse
import http.client
import json
import random
import socket
import sys
import threading
import time
import zlib


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def span(text):
    lo, _, hi = str(text).partition("-")
    return int(lo), int(hi or lo)


def line_reader(resp):
    """A function returning the response's next line (b"" at the end), decompressing a gzip
    body as it arrives, as a client that sent Accept-Encoding: gzip (most HTTP libraries do)."""
    if resp.getheader("Content-Encoding", "").lower() != "gzip":
        return resp.readline
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending = [b""]

    def read_line():
        while b"\n" not in pending[0]:
            data = resp.read1(65536)
            if not data:
                rest, pending[0] = pending[0] + inflate.flush(), b""
                return rest
            pending[0] += inflate.decompress(data)
        line, _, pending[0] = pending[0].partition(b"\n")
        return line + b"\n"
    return read_line


def one_request(args, rec, body, results, lock):
    t0 = time.time()
    rec["t_start"] = t0
    conn = None
    try:
        conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=args.timeout)
        headers = {"Content-Type": "application/json"}
        if args.accept_gzip:
            headers["Accept-Encoding"] = "gzip"
        conn.request("POST", "/v1/completions", body=json.dumps(body), headers=headers)
        if rec.get("abort_after") is not None:
            conn.sock.settimeout(max(0.01, rec["abort_after"]))
        resp = conn.getresponse()
        rec["status"] = resp.status
        if resp.status != 200:
            rec["error"] = resp.read(500).decode(errors="replace")
            rec["e2e"] = time.time() - t0
            return
        last = None
        read_line = line_reader(resp)
        gaps = rec["gaps"]  # filled as chunks come, so a request still open at the end keeps them
        while True:
            if rec.get("abort_after") is not None and time.time() - t0 >= rec["abort_after"]:
                rec["aborted"] = True
                break
            line = read_line()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                rec["finished"] = True
                break
            msg = json.loads(data)
            if "error" in msg:
                rec["error"] = json.dumps(msg["error"])[:300]
                continue
            now = time.time()
            for ch in msg.get("choices", []):
                if ch.get("text"):
                    if rec["ttft"] is None:
                        rec["ttft"] = now - t0
                    else:
                        gaps.append(round(now - last, 4))
                    last = now
                    rec["t_last_chunk"] = now
                    rec["chunks"] += 1
                if ch.get("finish_reason"):
                    rec["finish_reason"] = ch["finish_reason"]
            if msg.get("usage"):
                rec["tokens"] = msg["usage"].get("completion_tokens", 0)
                rec["prompt_tokens"] = msg["usage"].get("prompt_tokens")
        rec["e2e"] = time.time() - t0
        rec["gap_max"] = max(gaps) if gaps else None
    except socket.timeout:
        rec["e2e"] = time.time() - t0
        if rec.get("abort_after") is not None:
            rec["aborted"] = True
        else:
            rec["error"] = "client timeout"
    except (ConnectionError, OSError, http.client.HTTPException) as e:
        rec["e2e"] = time.time() - t0
        rec["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        if conn is not None:
            conn.close()
        with lock:
            results.append(rec)


def summarize(args, results, t_begin, t_arrivals_end, t_end, abandoned):
    ok = [r for r in results if r["status"] == 200 and r["finished"] and not r["error"]
          and not r.get("aborted")]
    by_status = {}
    for r in results:
        if r.get("aborted"):
            key = "client_abort"
        elif r["status"] is None:
            key = "no_answer"
        elif r["status"] == 200 and (r["error"] or not r["finished"]):
            key = "200_broken_stream"
        else:
            key = str(r["status"])
        by_status[key] = by_status.get(key, 0) + 1
    if abandoned:
        by_status["unfinished"] = abandoned
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    e2e = [r["e2e"] for r in ok]
    gaps = [g for r in ok for g in r.get("gaps", [])]
    tpot = [(r["e2e"] - r["ttft"]) / (r["tokens"] - 1) for r in ok
            if r["ttft"] is not None and r["tokens"] > 1]
    done_in_window = [r for r in ok if r["t_start"] + r["e2e"] <= t_arrivals_end]
    n_sent = len(results) + abandoned
    t_last = max([r["t_start"] + r["e2e"] for r in ok] or [t_end])
    finish = {}
    for r in ok:
        finish[r["finish_reason"] or "none"] = finish.get(r["finish_reason"] or "none", 0) + 1
    server_errors = sum(v for k, v in by_status.items()
                        if k.startswith("5") or k in ("200_broken_stream", "no_answer"))
    s = {
        "offered_rps_target": args.rate,
        "duration_s": round(t_arrivals_end - t_begin, 2),
        "sent": n_sent,
        "offered_rps": round(n_sent / (t_arrivals_end - t_begin), 3),
        "completed_ok": len(ok),
        "served_rps": round(len(ok) / max(t_arrivals_end - t_begin, t_last - t_begin), 3),
        "served_rps_in_window": round(len(done_in_window) / (t_arrivals_end - t_begin), 3),
        "by_status": by_status,
        "server_errors": server_errors,
        "client_aborts": by_status.get("client_abort", 0),
        "refused_4xx": sum(v for k, v in by_status.items() if k.startswith("4")),
        "finish_reasons": finish,
        "at_client_max_tokens": sum(1 for r in ok if r["tokens"] == r["max_tokens"]),
        "cut_below_max_tokens": sum(1 for r in ok if r["finish_reason"] == "length"
                                    and r["tokens"] < r["max_tokens"]),
        "ttft_p50_s": pct(ttft, 0.5), "ttft_p90_s": pct(ttft, 0.9), "ttft_p99_s": pct(ttft, 0.99),
        "ttft_max_s": max(ttft) if ttft else None,
        "e2e_p50_s": pct(e2e, 0.5), "e2e_p99_s": pct(e2e, 0.99),
        "itl_p50_s": pct(gaps, 0.5), "itl_p99_s": pct(gaps, 0.99),
        "itl_max_s": max(gaps) if gaps else None,
        "tpot_p50_s": pct(tpot, 0.5), "tpot_p99_s": pct(tpot, 0.99),
        "output_tokens": sum(r["tokens"] for r in ok),
        "output_tokens_per_s": round(sum(r["tokens"] for r in ok) / (t_end - t_begin), 2),
        "max_tokens": args.max_tokens, "prompt_tokens": args.prompt_tokens,
        "shared_prefix": args.shared_prefix, "long_prompts": args.long_prompts,
    }
    bursts = [r for r in ok if r.get("burst")]
    if any(r.get("burst") for r in results):
        steady = [r["ttft"] for r in ok if not r.get("burst") and r["ttft"] is not None]
        s.update({
            "burst_sent": sum(1 for r in results if r.get("burst")),
            "burst_ttft_p50_s": pct([r["ttft"] for r in bursts if r["ttft"]], 0.5),
            "steady_ttft_p50_s": pct(steady, 0.5), "steady_ttft_p99_s": pct(steady, 0.99),
        })
    for k, v in list(s.items()):
        if isinstance(v, float):
            s[k] = round(v, 4)
    return s


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--prompt-tokens", default="200-400")
    ap.add_argument("--max-tokens", default="128")
    ap.add_argument("--shared-prefix", default=None, help="K:F")
    ap.add_argument("--burst", default=None, help="AT:N")
    ap.add_argument("--abort", default=None, help="F:S")
    ap.add_argument("--long-prompts", default=None, help="F:LO-HI")
    ap.add_argument("--accept-gzip", action="store_true",
                    help="send Accept-Encoding: gzip, as most HTTP clients do")
    ap.add_argument("--drain", type=float, default=60)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    rng = random.Random(args.seed)
    plo, phi = span(args.prompt_tokens)
    mlo, mhi = span(args.max_tokens)
    prefix = None
    if args.shared_prefix:
        k, f = args.shared_prefix.split(":")
        prefix = ([rng.randint(100, 31000) for _ in range(int(k))], float(f))
    schedule = []
    t = 0.0
    while True:
        t += rng.expovariate(args.rate)
        if t >= args.duration:
            break
        schedule.append((t, False))
    if args.burst:
        at, n = args.burst.split(":")
        schedule += [(float(at), True)] * int(n)
        schedule.sort(key=lambda x: x[0])
    long_prompts = None
    if args.long_prompts:
        f, rng_text = args.long_prompts.split(":")
        long_prompts = (float(f), span(rng_text))
    abort = None
    if args.abort:
        f, secs = args.abort.split(":")
        abort = (float(f), float(secs))

    results, lock, threads = [], threading.Lock(), []
    t_begin = time.time()
    for i, (at, burst) in enumerate(schedule):
        n = rng.randint(plo, phi)
        if long_prompts and rng.random() < long_prompts[0]:
            n = rng.randint(*long_prompts[1])
        ids = [rng.randint(100, 31000) for _ in range(n)]
        if prefix and rng.random() < prefix[1]:
            ids = prefix[0] + ids[len(prefix[0]):]
        mt = rng.randint(mlo, mhi)
        rec = {"i": i, "t_sched": at, "burst": burst, "n_prompt": n, "max_tokens": mt,
               "status": None, "ttft": None, "e2e": None, "tokens": 0, "chunks": 0,
               "finish_reason": None, "error": None, "finished": False, "aborted": False,
               "gaps": [], "t_start": None,
               "abort_after": abort[1] if abort and rng.random() < abort[0] else None}
        body = {"model": args.model, "prompt": ids, "max_tokens": mt, "stream": True,
                "ignore_eos": True, "temperature": 0.0,
                "stream_options": {"include_usage": True}}
        delay = t_begin + at - time.time()
        if delay > 0:
            time.sleep(delay)
        th = threading.Thread(target=one_request, args=(args, rec, body, results, lock),
                              daemon=True)
        th.start()
        threads.append((th, rec))
    t_arrivals_end = max(time.time(), t_begin + args.duration)
    deadline = t_arrivals_end + args.drain
    for th, _ in threads:
        th.join(max(0.0, deadline - time.time()))
    t_end = time.time()
    # Requests still open at the end are kept too (marked unfinished, with what streamed so far):
    # a hang shows in them, not in the finished ones.
    open_recs = [dict(rec, unfinished=True) for th, rec in threads if th.is_alive()]
    abandoned = len(open_recs)
    with lock:
        done = list(results)
    s = summarize(args, done, t_begin, t_arrivals_end, t_end, abandoned)
    s["t_begin"] = t_begin
    s["t_end"] = t_end
    with open(args.out, "w") as fh:
        json.dump({"summary": s, "requests": done + open_recs}, fh)
    print(json.dumps(s), flush=True)


if __name__ == "__main__":
    sys.exit(main())
