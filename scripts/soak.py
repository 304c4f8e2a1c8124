#!/usr/bin/env python3
"""Soak and load driver for `llm-doctor serve` (run by scripts/bench-soak.sh, which starts the
Prometheus it queries). Starts a sink that flaps (answers 500 for FLAP_DOWN seconds of every
FLAP_PERIOD) and counts deliveries by fingerprint, starts the serve binary against it, sends
RATE firing alerts a second for DURATION seconds over TARGETS targets of the backfilled fleet,
resends what is answered 5xx (as Alertmanager does) until accepted, samples serve's RSS, and
prints latency, refusals, memory and what was delivered.

Each alert is its own notification with its own fingerprint. Its startsAt follows the wall
clock across the recording (the first alert at WINDOW after the recording's start), with up to a
second of jitter in milliseconds, as alerts from rule groups evaluated at different offsets have.
"""

import http.client
import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

E = os.environ
RATE = float(E.get("RATE", "100"))
DURATION = float(E.get("DURATION", "600"))
TARGETS = int(E.get("TARGETS", "50"))
FLAP_PERIOD = float(E.get("FLAP_PERIOD", "60"))
FLAP_DOWN = float(E.get("FLAP_DOWN", "10"))
# receiver.ack: after_delivery (the default) or on_receipt.
ACK = E.get("ACK", "after_delivery")
RESEND_AFTER = float(E.get("RESEND_AFTER", "1"))
RSS_EVERY = float(E.get("RSS_EVERY", "5"))
WARMUP = float(E.get("WARMUP", str(min(60.0, DURATION / 5))))
DATA_START = int(E["DATA_START"])
DATA_END = int(E["DATA_END"])
WINDOW = 300
BIN = E["LLM_DOCTOR_BIN"]
PROM = E["PROM_URL"]
WORK = E["WORK"]


class Sink(BaseHTTPRequestHandler):
    """The flapping webhook sink: down in the first FLAP_DOWN s of every FLAP_PERIOD."""

    counts = {}
    lock = threading.Lock()
    started = time.monotonic()
    refused = 0

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        phase = (time.monotonic() - Sink.started) % FLAP_PERIOD
        if FLAP_DOWN > 0 and phase < FLAP_DOWN:
            with Sink.lock:
                Sink.refused += 1
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        alerts = json.loads(body).get("alerts", [])
        with Sink.lock:
            for a in alerts:
                fp = a["fingerprint"]
                Sink.counts[fp] = Sink.counts.get(fp, 0) + 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        with Sink.lock:
            body = json.dumps({"counts": Sink.counts, "refused": Sink.refused}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


def alert_body(i, starts_at_s):
    t = i % TARGETS
    labels = {
        "alertname": "HighTTFT",
        "pod": f"vllm-{t}",
        "instance": f"gpu-node-{t + 1:03d}:8000",
        "job": "vllm",
        "severity": "warning",
    }
    starts = datetime.fromtimestamp(starts_at_s, timezone.utc).isoformat(timespec="milliseconds")
    alert = {
        "status": "firing",
        "labels": labels,
        "annotations": {},
        "startsAt": starts.replace("+00:00", "Z"),
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus/graph",
        "fingerprint": f"{i:016x}",
    }
    return json.dumps({
        "receiver": "llm-doctor", "status": "firing", "alerts": [alert],
        "groupLabels": {"alertname": "HighTTFT", "pod": labels["pod"]},
        "commonLabels": labels, "commonAnnotations": {}, "externalURL": "http://am",
        "version": "4", "groupKey": f'{{}}:{{alertname="HighTTFT",pod="{labels["pod"]}"}}',
        "truncatedAlerts": 0,
    }).encode()


def start_serve(sink_port):
    port = free_port()
    retry = E.get("RETRY_DEADLINE", "1s")
    config = os.path.join(WORK, "doctor.yaml")
    with open(config, "w") as f:
        f.write(
            f"listen: 127.0.0.1:{port}\nprometheus:\n  url: {PROM}\n"
            f"sinks:\n  - type: webhook\n    url: http://127.0.0.1:{sink_port}/hook\n"
            f"retry:\n  deadline: {retry}\n  initial_backoff: 50ms\n"
            f"receiver:\n  ack: {ACK}\n"
        )
    log = open(os.path.join(WORK, "serve.log"), "w")
    proc = subprocess.Popen([BIN, "serve", "--config", config], stderr=log)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return proc, port
        except OSError:
            time.sleep(0.05)
    sys.exit("serve did not start: see " + log.name)


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        m = re.search(r"VmRSS:\s+(\d+)", f.read())
    return int(m.group(1))


def run_sink():
    """`soak.py sink`: the sink alone, in a process of its own so that the load's threads do
    not slow its answers; prints its port."""
    sink = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    sink.daemon_threads = True
    print(sink.server_address[1], flush=True)
    sink.serve_forever()


def sink_state(sink_port):
    c = http.client.HTTPConnection("127.0.0.1", sink_port, timeout=30)
    c.request("GET", "/counts")
    return json.loads(c.getresponse().read())


def main():
    sink = subprocess.Popen([sys.executable, __file__, "sink"], stdout=subprocess.PIPE, text=True)
    sink_port = int(sink.stdout.readline())
    proc, port = start_serve(sink_port)
    errors = {}
    jobs = queue.Queue()
    results = []  # (latency s, status, sent at s since start)
    rlock = threading.Lock()
    accepted = set()
    begin = time.monotonic()

    def worker():
        conn = None
        while True:
            job = jobs.get()
            if job is None:
                return
            i, body, tries = job
            t0 = time.monotonic()
            status = 0
            # A kept-alive connection the server closed while idle fails at once: one more
            # try on a fresh connection, as Go's client (Alertmanager's) does.
            for fresh in (conn is None, True):
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                    conn.request("POST", "/alertmanager", body, {"Content-Type": "application/json"})
                    r = conn.getresponse()
                    answer = r.read()
                    status = r.status
                    if not 200 <= status < 300:
                        why = json.loads(answer or b"{}").get("error", "")[:40]
                        with rlock:
                            errors[why] = errors.get(why, 0) + 1
                    break
                except (OSError, http.client.HTTPException):
                    conn = None
                    if fresh:
                        break
            dt = time.monotonic() - t0
            with rlock:
                results.append((dt, status, t0 - begin))
                if 200 <= status < 300:
                    accepted.add(i)
            if not 200 <= status < 300:
                # As Alertmanager: the same notification again, after a backoff that doubles.
                delay = min(RESEND_AFTER * 2 ** tries, 16.0) * (0.5 + random.random())
                threading.Timer(delay, jobs.put, ((i, body, tries + 1),)).start()

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(int(E.get("WORKERS", "200")))]
    for w in workers:
        w.start()

    rss = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            rss.append((time.monotonic() - begin, rss_kib(proc.pid)))
            stop.wait(RSS_EVERY)

    threading.Thread(target=sample, daemon=True).start()
    span = DATA_END - DATA_START - WINDOW
    sent = 0
    while True:
        now = time.monotonic() - begin
        if now >= DURATION:
            break
        due = int(now * RATE) + 1
        while sent < due:
            at = DATA_START + WINDOW + (now % span) + random.random()
            jobs.put((sent, alert_body(sent, at), 0))
            sent += 1
        time.sleep(max(0.0, (sent / RATE) - (time.monotonic() - begin)))
    drain_deadline = time.monotonic() + 120
    while len(accepted) < sent and time.monotonic() < drain_deadline:
        time.sleep(0.2)
    # on_receipt: a 202 is not a delivery yet; wait for the queue to empty into the sink.
    while ACK == "on_receipt" and time.monotonic() < drain_deadline:
        counts = sink_state(sink_port)["counts"]
        if sum(1 for i in range(sent) if f"{i:016x}" in counts) >= sent:
            break
        time.sleep(0.5)
    stop.set()
    end_rss = rss_kib(proc.pid)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    for _ in workers:
        jobs.put(None)
    state = sink_state(sink_port)
    sink.terminate()
    report(sent, accepted, results, rss, end_rss, state, errors)


def pct(sorted_values, q):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def report(sent, accepted, results, rss, end_rss, state, errors):
    lat = sorted(r[0] for r in results)
    up = sorted(r[0] for r in results
                if FLAP_DOWN == 0 or (r[2] % FLAP_PERIOD) >= FLAP_DOWN + 1)
    codes = {}
    for r in results:
        codes[r[1]] = codes.get(r[1], 0) + 1
    counts = state["counts"]
    delivered = sum(1 for i in range(sent) if f"{i:016x}" in counts)
    dups = sum(1 for n in counts.values() if n > 1)
    warm = [kib for t, kib in rss if t >= WARMUP]
    warm_rss = warm[0] if warm else end_rss
    peak = max([kib for _, kib in rss] + [end_rss])
    print(f"soak: {sent} alerts at {RATE:g}/s for {DURATION:g} s over {TARGETS} targets; "
          f"sink down {FLAP_DOWN:g} s of every {FLAP_PERIOD:g} s")
    print(f"requests: {len(results)} (answers by status: {dict(sorted(codes.items()))}); "
          f"503: {codes.get(503, 0)}")
    print(f"latency per POST: p50 {pct(lat, .5) * 1e3:.1f} ms, p99 {pct(lat, .99) * 1e3:.1f} ms, "
          f"max {lat[-1] * 1e3:.1f} ms")
    print(f"latency per POST outside sink outages (+1 s): p50 {pct(up, .5) * 1e3:.1f} ms, "
          f"p99 {pct(up, .99) * 1e3:.1f} ms ({len(up)} requests)")
    warmed = sorted(r[0] for r in results if r[2] >= WARMUP)
    print(f"latency per POST after warm-up ({WARMUP:g} s): p50 {pct(warmed, .5) * 1e3:.1f} ms, "
          f"p99 {pct(warmed, .99) * 1e3:.1f} ms ({len(warmed)} requests)")
    by10 = {}
    for dt, _, at in results:
        by10.setdefault(int(at // 10) * 10, []).append(dt)
    print("p99 per 10 s (s: ms): " + ", ".join(
        f"{k}: {pct(sorted(v), .99) * 1e3:.0f}" for k, v in sorted(by10.items())))
    print(f"rss: {warm_rss / 1024:.1f} MiB after warm-up ({WARMUP:g} s), {end_rss / 1024:.1f} MiB "
          f"at end, ratio {end_rss / warm_rss:.3f}, peak {peak / 1024:.1f} MiB")
    print(f"delivered: {delivered} of {sent} alerts ({len(accepted)} answered 2xx), "
          f"{dups} delivered more than once, sink refused {state['refused']} deliveries")
    at = {}
    for t, kib in rss:
        for mark in (60, 180, 600):
            if t >= mark and mark not in at:
                at[mark] = kib
    print("rss at " + ", ".join(f"{m} s: {k / 1024:.1f} MiB" for m, k in sorted(at.items()))
          + (f"; 600/60 {at[600] / at[60]:.3f}, 600/180 {at[600] / at[180]:.3f}"
             if {60, 180, 600} <= at.keys() else ""))
    print(f"refusals by reason: {errors}")
    print("rss samples (s: MiB): " + ", ".join(f"{t:.0f}: {k / 1024:.1f}" for t, k in rss[:: max(1, len(rss) // 20)]))


if __name__ == "__main__":
    if sys.argv[1:] == ["sink"]:
        run_sink()
    else:
        main()
