#!/usr/bin/env python3
"""Per-request corpus runs: a real vLLM replica behind a real nginx, faults on the way to it.

One vLLM replica (vLLM's CPU backend, as in vllm_runs.py) is started once for a session and
kept up across its runs, as a production replica is: its counters carry on from run to run.
Each run puts its own nginx in front of it (the README's JSON access log, its $request_id
passed as X-Request-Id, which vLLM takes as the request's id), drives an open-loop load through
it (vllm_load.py) and keeps what a deployment keeps: /metrics every second, vLLM's own request
spans (--otlp-traces-endpoint), nginx's access log. The faults sit where they happen in
production, outside the engine:

- a slow hop between the gateway and the engine: a TCP proxy that holds each connection for a
  fixed time before it reaches vLLM (what a congested link, a slow sidecar or TLS setup does);
- one upstream of two slow: nginx balances round-robin between vLLM itself and the same vLLM
  behind such a proxy (the second upstream is relabelled as a second replica; its engine
  metrics are the first's, which is where a real second replica would differ);
- nginx's defaults (`proxy_buffering on`) with `gzip` on for `text/event-stream`, a client that
  accepts gzip (as the OpenAI SDK's httpx does): the compressor holds the stream back until the
  answer ends (`proxy_buffering on` alone, or gzip with buffering off, still streamed in a
  check with nginx 1.22);
- long prompts among short ones (the engine's own head-of-line).

Labels come from the load generator's client-side numbers, the engine's own TTFT histogram and
nginx's log, never from llm-doctor; the objectives are vllm_runs.py's, set before any run.

    python3 scripts/corpus/gateway_runs.py                 # every run without a raw run yet
    python3 scripts/corpus/gateway_runs.py --only ID ...   # some
    python3 scripts/corpus/gateway_runs.py --write         # cases from the raw runs
"""

import argparse
import gzip
import json
import os
import re
import shlex
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vllm_runs as V  # noqa: E402

OUT_DIR = os.path.join(V.REPO, "corpus", "gateway")

# Short requests keep each run's count past the 100 a p99 of joined requests needs.
SHORT = {"prompt": "100-200", "max_tokens": "24-48"}
LONG_ANSWERS = {"prompt": "100-200", "max_tokens": "96-160"}


def load(rate, duration=160, seed=None, shape=SHORT, **kw):
    d = dict(shape, rate=rate, duration=duration, drain=60)
    if seed is not None:
        d["seed"] = seed
    d.update(kw)
    return d


# Runs as data. delay: seconds the proxy holds each connection; split: the delayed path is one
# upstream of two (else every request takes it); buffering: proxy_buffering on.
RUNS = [
    {"id": "gw-healthy-70", "design": "healthy", "load": load(0.7, seed=301)},
    {"id": "gw-slow-hop-4s", "design": "slow_hop", "delay": 4.0, "load": load(0.7, seed=302)},
    {"id": "gw-buffering-long-answers", "design": "buffering", "buffering": True, "gzip": True,
     "load": load(0.3, 150, seed=303, shape=LONG_ANSWERS, accept_gzip=True)},
    {"id": "gw-one-upstream-slow-4s", "design": "slow_upstream", "delay": 4.0, "split": True,
     "load": load(0.7, seed=304)},
    {"id": "gw-healthy-50", "design": "healthy", "load": load(0.5, 200, seed=305)},
    {"id": "gw-slow-hop-300ms-near-miss", "design": "near_miss_slow_hop", "delay": 0.3,
     "load": load(0.7, seed=306)},
    {"id": "gw-buffering-short-answers-near-miss", "design": "near_miss_buffering",
     "buffering": True, "gzip": True, "load": load(0.6, seed=307, accept_gzip=True)},
    {"id": "gw-one-upstream-slow-500ms-near-miss", "design": "near_miss_slow_upstream",
     "delay": 0.5, "split": True, "load": load(0.7, seed=308)},
    {"id": "gw-long-prompts-among-short", "design": "long_prompt",
     "load": load(0.5, seed=309, long_prompts="0.1:1500-2000")},
    {"id": "gw-slow-hop-6s", "design": "slow_hop", "delay": 6.0, "load": load(0.6, 180, seed=310)},
    {"id": "gw-one-upstream-slow-6s", "design": "slow_upstream", "delay": 6.0, "split": True,
     "load": load(0.6, 180, seed=311)},
    {"id": "gw-buffering-long-answers-b", "design": "buffering", "buffering": True, "gzip": True,
     "load": load(0.4, 150, seed=312, shape=LONG_ANSWERS, accept_gzip=True)},
    {"id": "gw-healthy-60", "design": "healthy", "load": load(0.6, seed=313)},
    {"id": "gw-healthy-long-answers", "design": "healthy",
     "load": load(0.3, 150, seed=314, shape=LONG_ANSWERS)},
    {"id": "gw-long-prompts-rare-near-miss", "design": "near_miss_long_prompt",
     "load": load(0.5, seed=315, long_prompts="0.02:1500-2000")},
    {"id": "gw-slow-hop-3s-light", "design": "slow_hop", "delay": 3.5, "load": load(0.7, seed=316)},
    {"id": "gw-one-upstream-slow-3s", "design": "slow_upstream", "delay": 3.5, "split": True,
     "load": load(0.7, seed=317)},
    {"id": "gw-buffering-long-answers-light", "design": "buffering", "buffering": True,
     "gzip": True, "load": load(0.2, 150, seed=318, shape=LONG_ANSWERS, accept_gzip=True)},
    {"id": "gw-healthy-40", "design": "healthy", "load": load(0.4, 200, seed=319)},
    {"id": "gw-long-prompts-among-short-b", "design": "long_prompt",
     "load": load(0.4, seed=320, long_prompts="0.15:1500-2000")},
    {"id": "gw-healthy-65-b", "design": "healthy", "load": load(0.65, seed=321)},
    # Three upstreams: vLLM itself, vLLM behind a proxy that holds nothing, and behind one
    # that holds each connection.
    {"id": "gw-one-of-three-upstreams-slow-5s", "design": "slow_upstream", "delays": [0.0, 5.0],
     "load": load(0.75, seed=322)},
    {"id": "gw-one-of-three-upstreams-300ms-near-miss", "design": "near_miss_slow_upstream",
     "delays": [0.0, 0.3], "load": load(0.75, seed=323)},
    {"id": "gw-slow-hop-5s-busy", "design": "slow_hop", "delay": 5.0, "load": load(0.8, seed=324)},
]

TITLES = {
    "healthy": "A real vLLM replica behind nginx under a load it serves within its objectives.",
    "slow_hop": "A slow hop between nginx and the replica: every request held on the way.",
    "near_miss_slow_hop": "A short delay between nginx and the replica that costs no objective.",
    "slow_upstream": "One of nginx's two upstreams slow: half the requests held on the way.",
    "near_miss_slow_upstream": "One of two upstreams a little slower, within the objectives.",
    "buffering": "nginx buffering and compressing the event stream: answers held back whole.",
    "near_miss_buffering": "A stream held back whole, with answers short enough to meet the objectives.",
    "long_prompt": "Long prompts among short ones behind nginx.",
    "near_miss_long_prompt": "A few long prompts among short ones, within the objectives.",
}


class DelayProxy(threading.Thread):
    """A TCP proxy that holds each new connection `delay` seconds, then pipes it to `port`."""

    def __init__(self, port, delay):
        super().__init__(daemon=True)
        self.target, self.delay = port, delay
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.port = self.sock.getsockname()[1]
        self.stopped = False

    def run(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        time.sleep(self.delay)
        try:
            up = socket.create_connection(("127.0.0.1", self.target))
        except OSError:
            conn.close()
            return

        def pipe(a, b):
            try:
                while True:
                    data = a.recv(65536)
                    if not data:
                        break
                    b.sendall(data)
            except OSError:
                pass
            finally:
                for s in (a, b):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        t = threading.Thread(target=pipe, args=(up, conn), daemon=True)
        t.start()
        pipe(conn, up)
        t.join()
        conn.close()
        up.close()

    def stop(self):
        self.stopped = True
        self.sock.close()


def session(runs, cal, work, idle=6, flush=8):
    """One replica for all `runs`; a raw run per run, as vllm_runs.do_run writes them."""
    port = V.free_port()
    log_path = os.path.join(work, "gateway-session.server.log")
    log = open(log_path, "a")
    sink = V.TraceSink(os.path.join(work, "gateway-session.otlp.bin"))
    sink.start()
    sup = V.Supervisor({"id": "gateway-session", "trace_port": sink.port}, port, log)
    sup.restart = False
    scraper = None
    pause = os.path.join(work, "PAUSE")
    try:
        sup.start()
        startup_s = V.wait_health(port, sup)
        scraper = V.Scraper("http://127.0.0.1:%d/metrics" % port)
        scraper.start()
        time.sleep(idle)
        for run in runs:
            while os.path.exists(pause):
                time.sleep(5)
            if sup.exits:
                raise RuntimeError("the replica exited: %s" % sup.exits)
            t0 = time.time()
            print("run", run["id"], flush=True)
            try:
                raw = one_run(run, cal, work, port, sink, scraper, log_path, startup_s, idle,
                              flush)
            except Exception as e:
                print("  failed:", e, flush=True)
                continue
            print("  done in %.0f s:" % (time.time() - t0), json.dumps(
                {k: raw["summary"][k] for k in ("sent", "offered_rps", "served_rps_in_window",
                                                "ttft_p99_s", "e2e_p99_s", "itl_p99_s",
                                                "by_status")}), flush=True)
    finally:
        if scraper:
            scraper.stop_ev.set()
            scraper.join()
        sup.stop()
        sink.stop()
        log.close()


def one_run(run, cal, work, port, sink, scraper, log_path, startup_s, idle, flush):
    traces = os.path.join(work, run["id"] + ".otlp.bin")
    if os.path.exists(traces):
        os.remove(traces)
    with sink.lock:
        sink.path, sink.batches, sink.bytes = traces, 0, 0
    log_from = os.path.getsize(log_path)
    t_from = time.time()
    proxies, upstreams = [], [port]
    if run.get("delay"):
        proxy = DelayProxy(port, run["delay"])
        proxy.start()
        proxies.append(proxy)
        upstreams = [port, proxy.port] if run.get("split") else [proxy.port]
    for d in run.get("delays", []):
        proxy = DelayProxy(port, d)
        proxy.start()
        proxies.append(proxy)
        upstreams.append(proxy.port)
    gateway = V.Gateway(work, run["id"], port, buffering=run.get("buffering", False),
                        upstreams=upstreams, gzip_stream=run.get("gzip", False))
    load_before = V.load1()
    try:
        time.sleep(idle)
        ld = run["load"]
        rate = V.resolve_rate(ld["rate"], cal)
        out = os.path.join(work, run["id"] + ".load.json")
        largv = V.load_argv(ld, gateway.port, rate, out, run["id"])
        t_load = time.time()
        lp = subprocess.run(largv, capture_output=True, text=True)
        if lp.returncode != 0:
            raise RuntimeError("load generator failed: " + lp.stderr[-2000:])
        # vLLM exports its spans in batches every few seconds: the last ones come after.
        time.sleep(idle + flush)
        load_after = V.load1()
    finally:
        gateway.stop()
        for p in proxies:
            p.stop()
    t_to = time.time()
    with sink.lock:
        sink.path = os.path.join(work, "gateway-session.otlp.bin")
        batches, nbytes = sink.batches, sink.bytes
    run_log = os.path.join(work, run["id"] + ".server.log")
    with open(log_path, "rb") as fh, open(run_log, "wb") as dst:
        fh.seek(log_from)
        dst.write(fh.read())
    with open(out) as fh:
        loaddata = json.load(fh)
    names = {port: V.HOST + ":8000"}
    several = run.get("split") or run.get("delays")
    for i, p in enumerate(proxies):
        names[p.port] = "cpu-node-%d:8000" % (i + 2) if several else V.HOST + ":8000"
    raw = {"id": run["id"], "run": run, "rate": rate,
           "server_argv": V.server_argv({"trace_port": sink.port}, port),
           "engine_args": V.short_cmd(run), "load_argv": largv, "startup_s": round(startup_s, 1),
           "load_before": load_before, "load_after": load_after, "faults": [],
           "starts": [t_from], "exits": [], "t_load": t_load,
           "summary": loaddata["summary"], "requests": loaddata["requests"],
           "scrapes": [s for s in scraper.scrapes if t_from <= s[0] <= t_to],
           "calibration": cal, "log_facts": V.log_facts(run_log), "log_path": run_log,
           "traces": {"path": traces, "batches": batches, "bytes": nbytes},
           "gateway": {"access_log": gateway.log, "port": gateway.port,
                       "upstream_names": {str(k): v for k, v in names.items()},
                       "delayed": [str(p.port) for p in proxies]}}
    raw["engine"] = V.engine_numbers(raw)
    with gzip.open(os.path.join(work, run["id"] + ".raw.json.gz"), "wt") as fh:
        json.dump(raw, fh)
    return raw


# ---------------------------------------------------------------- labels

def engine_ttft_p99(raw):
    """The upper bound of the bucket holding the p99 of vLLM's own TTFT histogram over the run
    (the engine's view: time from its API server receiving a request to the first token)."""
    first = last = None
    for _, body in raw["scrapes"]:
        if body is None:
            continue
        b = {}
        for le, v in re.findall(r'^vllm:time_to_first_token_seconds_bucket\{[^}]*le="([^"]+)"'
                                r'[^}]*\} (\S+)$', body, re.M):
            b[float(le)] = b.get(float(le), 0.0) + float(v)
        if b:
            first = first or b
            last = b
    if not first or not last:
        return None
    les = sorted(last)
    counts = [last[le] - first.get(le, 0.0) for le in les]
    total = counts[-1]
    if total <= 0:
        return None
    for le, c in zip(les, counts):
        if c >= 0.99 * total:
            return le
    return les[-1]


def upstream_times(raw):
    """Median nginx request_time per upstream (relabelled), from nginx's own access log."""
    names = raw["gateway"]["upstream_names"]
    by = {}
    with open(raw["gateway"]["access_log"]) as fh:
        for line in fh:
            rec = json.loads(line)
            port = rec.get("upstream_addr", "").rsplit(":", 1)[-1]
            by.setdefault(names.get(port, port), []).append(float(rec["request_time"]))
    return {k: (len(v), statistics.median(v)) for k, v in by.items()}


def label_run(raw):
    """(verdict, cause, predicate): the design says which predicate is tried, the client's
    numbers, the engine's histogram and nginx's log decide."""
    s, d = raw["summary"], raw["run"]["design"]
    slos = V.slos_of(raw["calibration"])
    ok = [r for r in raw["requests"] if r["status"] == 200 and r["finished"] and not r["error"]]
    lo, _, hi = str(s["prompt_tokens"]).partition("-")
    p_max = max([r.get("prompt_tokens") or r["n_prompt"] for r in ok] or [int(hi or lo)])
    # The product's TTFT objective: the objective plus the p99 prompt at the prefill rate.
    prompts = sorted(r.get("prompt_tokens") or r["n_prompt"] for r in ok)
    p99_prompt = prompts[min(len(prompts) - 1, int(0.99 * len(prompts)))] if prompts else p_max
    allowed = slos["ttft_p99_seconds"] + p99_prompt / slos["prefill_tokens_per_second"]
    ttft, itl, e2e = (s["ttft_p99_s"] or 0.0), (s["itl_p99_s"] or 0.0), (s["e2e_p99_s"] or 0.0)
    sent = max(s["sent"], 1)
    served = s["served_rps"] / max(s["offered_rps"], 1e-9)
    errors = s["server_errors"]
    eng_ttft = engine_ttft_p99(raw)
    eng = raw["engine"]
    whole = [r["ttft"] / r["e2e"] for r in ok if r["ttft"] and r["e2e"]]
    at_once = statistics.median(whole) if whole else 0.0
    ups = upstream_times(raw)
    healthy = (ttft <= allowed and itl <= slos["itl_p99_seconds"]
               and e2e <= slos["e2e_p99_seconds"] and errors / sent <= slos["error_ratio"]
               and served >= 0.9)
    base = ("client (through nginx): %d requests, TTFT p99 %.2f s (objective %.1f s plus the p99 "
            "prompt of %d tokens at %.0f tokens/s: %.2f s), stream gaps p99 %.3f s (objective "
            "%.1f s), e2e p99 %.1f s (objective %.0f s), served %.0f %% of offered, %d server "
            "errors, median first token at %.0f %% of the answer's time; engine: TTFT p99 at most "
            "%s s (its histogram's bucket), %d preemptions, up to %s running and %s waiting; "
            "nginx: %s"
            % (sent, ttft, slos["ttft_p99_seconds"], p99_prompt,
               slos["prefill_tokens_per_second"], allowed, itl, slos["itl_p99_seconds"], e2e,
               slos["e2e_p99_seconds"], 100 * served, errors, 100 * at_once, eng_ttft,
               eng["preemptions"], eng["max_running"], eng["max_waiting"],
               ", ".join("%s %d requests, median %.2f s" % (k, n, m)
                         for k, (n, m) in sorted(ups.items()))))
    if d.startswith("healthy") or d.startswith("near_miss"):
        if healthy:
            return ("near_miss" if d.startswith("near_miss") else "healthy"), None, \
                base + ": every objective met"
        return None, None, base + ": designed quiet, an objective missed"
    if healthy:
        return None, None, base + ": the fault did not bite"
    engine_ok = eng_ttft is not None and eng_ttft <= allowed
    if d == "slow_hop":
        cause, holds, why = ("network_latency", ttft > allowed and engine_ok,
                             "the client's TTFT p99 past its objective, the engine's own within "
                             "it: the time went between the gateway and the engine")
    elif d == "slow_upstream":
        slowest = max(ups.values(), key=lambda v: v[1]) if ups else None
        rest = [m for v in ups.values() if v is not slowest for m in [v[1]]]
        holds = (ttft > allowed and engine_ok and slowest is not None and len(rest) > 0
                 and slowest[1] >= 2 * max(rest))
        cause, why = ("slow_replica", "the client's TTFT p99 past its objective, the engine's "
                      "own within it, and nginx's median time on one upstream at least twice "
                      "every other's")
    elif d == "buffering":
        # The time is lost at the proxy, outside the engine: the corpus's field reports of
        # SSE held back by nginx are labelled so too (network_latency, whose fix is the
        # proxy's buffering); streaming_disabled is a client that asked for no stream.
        cause, holds, why = ("network_latency", ttft > allowed and engine_ok and at_once >= 0.9,
                             "the client's TTFT p99 past its objective, the engine's own within "
                             "it, and the median request's first token arriving with its last "
                             "(the stream held back at the proxy)")
    elif d == "long_prompt":
        cause, holds, why = ("long_prompt_prefill", ttft > allowed and eng["preemptions"] == 0,
                             "TTFT p99 past the objective plus the p99 prompt's prefill")
        if not holds and ttft <= allowed:
            cause, holds, why = ("prefill_decode_interference",
                                 itl > slos["itl_p99_seconds"] and eng["preemptions"] == 0,
                                 "TTFT within its objective, stream gaps p99 past theirs while "
                                 "long prompts prefill beside running decodes")
    else:
        return None, None, base + ": design %s has no cause" % d
    if not holds:
        return None, None, base + ": objectives missed but not as designed (%s)" % why
    return "fault", cause, base + "; " + why


# ---------------------------------------------------------------- cases

def copy_access_log(raw, out_dir):
    """nginx's access log as requests/<id>.jsonl.gz, each upstream relabelled by name."""
    names = raw["gateway"]["upstream_names"]
    os.makedirs(os.path.join(out_dir, "requests"), exist_ok=True)
    out = os.path.join(out_dir, "requests", raw["id"] + ".jsonl.gz")
    n = 0
    with open(raw["gateway"]["access_log"]) as fh, gzip.open(out, "wt") as gz:
        for line in fh:
            rec = json.loads(line)
            addr = rec.get("upstream_addr") or ""
            m = re.fullmatch(r"127\.0\.0\.1:(\d+)", addr)
            if m:
                rec["upstream_addr"] = names.get(m.group(1), addr)
            gz.write(json.dumps(rec, separators=(",", ":")) + "\n")
            n += 1
    return n


def upstreams_text(run):
    if run.get("delays"):
        return "vLLM, " + ", ".join("vLLM behind a proxy holding each connection %.1f s" % d
                                    for d in run["delays"])
    if not run.get("delay"):
        return "vLLM"
    if run.get("split"):
        return "vLLM and vLLM behind a proxy holding each connection %.1f s" % run["delay"]
    return "vLLM behind a proxy holding each connection %.1f s" % run["delay"]


def write_case(raw, out_dir):
    import yaml
    yaml.add_representer(V.Lit, lambda dumper, data: dumper.represent_scalar(
        "tag:yaml.org,2002:str", data, style="|"))
    verdict, cause, predicate = label_run(raw)
    if verdict is None:
        print("  %s: no predicate met (%s); not written" % (raw["id"], predicate))
        return None
    rec = V.build_recording(raw)
    path = os.path.join(out_dir, raw["id"] + ".om.gz")
    rec.write(path)
    info = V.check_recording(path)
    n_log = copy_access_log(raw, out_dir)
    traces = V.replay_traces(raw, out_dir)
    label = {"verdict": verdict}
    if cause:
        label["cause"] = cause
    label["predicate"] = predicate
    run = raw["run"]
    made_by = [V.short_cmd(run) + "   (one replica for the session, on this CPU)",
               "nginx (proxy_buffering %s%s, upstreams: %s, the README's JSON access log)"
               % ("on" if run.get("buffering") else "off",
                  ", gzip on for text/event-stream" if run.get("gzip") else "",
                  upstreams_text(run)),
               "python3 scripts/corpus/vllm_load.py " + " ".join(
                   shlex.quote(a) for a in raw["load_argv"][2:]),
               "(scripts/corpus/gateway_runs.py --only %s: /metrics scraped every 1 s; "
               "relabelled job=vllm instance=%s:8000)" % (raw["id"], V.HOST)]
    s = raw["summary"]
    case = {
        "id": raw["id"], "family": "gateway", "engine": "vllm", "recording": raw["id"] + ".om.gz",
        "engine_args": raw["engine_args"], "slos": V.slos_of(raw["calibration"]),
        "requests": ["requests/%s.jsonl.gz" % raw["id"], "traces/%s.jsonl.gz" % raw["id"]],
        # What the client measured and a gateway log cannot: the first streamed token.
        "signals": {"client_ttft_p99_seconds": round(s["ttft_p99_s"], 3)},
        "made_by": V.Lit("\n".join(made_by) + "\n"), "label": label,
        "ground_truth": dict(V.gt_of(raw), engine_ttft_p99_bucket_s=engine_ttft_p99(raw),
                             nginx_upstreams={k: {"requests": n, "median_s": round(m, 3)}
                                              for k, (n, m) in upstream_times(raw).items()}),
        "notes": V.Lit(
            "%s serving a Llama-architecture model of about 270M parameters with random weights "
            "on 2 CPU cores (as in the vllm family: no GPU metrics, KV cache in host memory, CPU "
            "speeds), one replica kept up for the whole session of runs, so its counters carry "
            "on from the runs before. The client's requests went through nginx 1.22 (its "
            "$request_id passed as X-Request-Id, which vLLM takes as the request's id); its "
            "access log (%d requests) is requests/%s.jsonl.gz, the engine's own request spans "
            "(%d exports, %d spans, received by llm-doctor record --otlp from the batches vLLM "
            "posted) traces/%s.jsonl.gz. A delayed upstream is the same engine behind a TCP "
            "proxy that holds each connection before passing it on; where nginx balances over "
            "several upstreams, each proxy is named as a replica of its own in the log "
            "(cpu-node-2:8000, cpu-node-3:8000), though its engine metrics are cpu-node-1's. "
            "The client's TTFT p99 is given as a signal (what a client SDK or a "
            "synthetic probe measures; nginx logs no first-byte time). Load average %.2f "
            "before, %.2f after. Recording: %d scrapes, %d series. Designed as: %s.\n"
            % (V.VERSION, n_log, raw["id"], traces["exports"], traces["spans"], raw["id"],
               raw["load_before"], raw["load_after"], info["scrapes"], info["series"],
               run["design"])),
    }
    with open(os.path.join(out_dir, raw["id"] + ".yaml"), "w") as fh:
        fh.write("# %s\n" % TITLES.get(run["design"], run["design"]))
        yaml.dump(case, fh, sort_keys=False, width=100, allow_unicode=True)
    return case


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default=os.path.join(V.WORK, "runs"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    ids = {r["id"] for r in RUNS}
    if args.write:
        os.makedirs(OUT_DIR, exist_ok=True)
        for raw in V.load_raws(args.work, set(args.only or ids) & ids):
            case = write_case(raw, OUT_DIR)
            if case:
                print("wrote", raw["id"], case["label"]["verdict"], case["label"].get("cause"))
        return
    with open(os.path.join(args.work, "calibration.json")) as fh:
        cal = json.load(fh)
    runs = [r for r in RUNS if (not args.only or r["id"] in args.only)
            and not os.path.exists(os.path.join(args.work, r["id"] + ".raw.json.gz"))]
    session(runs, cal, args.work)


if __name__ == "__main__":
    main()
