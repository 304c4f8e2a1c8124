#!/usr/bin/env python3
"""Measures `record --scrape` over many rounds (BENCHMARKS.md, "Recording a long scrape").

Serves ENDPOINTS copies of one replica's pages (a vLLM engine with its dcgm-exporter and
node_exporter series, 263 series, from `gen_fixtures.py --fleet-bench 1`) on 127.0.0.1, each
request a new scrape (counters grow, gauges move), records them for ROUNDS rounds at INTERVAL
with each binary given, alternating, and prints per run: wall, CPU (user + system), peak
memory (`/usr/bin/time`), the bytes the process wrote (/proc/PID/io `wchar`, read every
50 ms until it exits, so the final write may be missing from it), the recording's text size
(unpacked with `--gzip`) and the rounds it holds, and how well the rounds kept their schedule: the largest distance between two
rounds of one endpoint, and how many rounds came more than half an interval late.

    python3 scripts/bench_record.py [--endpoints 4] [--rounds 400] [--interval 0.05] [--gzip] BIN...
"""

import argparse
import gzip
import http.server
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def one_replica_page(work):
    """The last sample of each series of one generated replica, without timestamps, and
    without `instance` and `job` (the recorder gives each endpoint its own)."""
    path = os.path.join(work, "one.om.gz")
    subprocess.run(
        [sys.executable, os.path.join(HERE, "gen_fixtures.py"), "--fleet-bench", "1", path, "--hours", "0.1"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    header, last = [], {}
    for line in gzip.open(path, "rt"):
        if line.startswith("# EOF"):
            continue
        if line.startswith("#"):
            header.append(line)
            last.setdefault(("#", len(header)), line)
            continue
        key, value, _t = line.rsplit(" ", 2)
        key = re.sub(r'(instance|job)="[^"]*",?', "", key).replace(",}", "}").replace("{}", "")
        last[key] = float(value)
    rows = []
    for key, value in last.items():
        if isinstance(key, tuple):
            rows.append((value, None, False))
        else:
            grows = key.split("{")[0].endswith(("_total", "_count", "_sum", "_bucket"))
            rows.append((key, value, grows))
    return rows


def page(rows, k):
    """Scrape number `k`: counters grown by k, gauges moving."""
    out = []
    for key, value, grows in rows:
        if value is None:
            out.append(key)
        elif grows:
            out.append(f"{key} {value + k * (1 + value % 7)}\n")
        else:
            out.append(f"{key} {value * (1 + 0.01 * (k % 13))}\n")
    return "".join(out).encode()


def serve(rows, n):
    counter = {"k": 0}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            with lock:
                counter["k"] += 1
                k = counter["k"]
            body = page(rows, k)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    servers = []
    for _ in range(n):
        s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers.append(s)
    return servers


def run(binary, urls, rounds, interval, out):
    duration = f"{int(round((rounds - 1) * interval * 1000))}ms"
    args = [binary, "record", "--duration", duration, "--interval", f"{int(interval * 1000)}ms", "--out", out]
    for u in urls:
        args += ["--scrape", u]
    timing = out + ".time"
    # /usr/bin/time for the peak: a child's own maximum resident set, not that of the Python
    # process it was forked from.
    p = subprocess.Popen(["/usr/bin/time", "-f", "%e %U %S %M", "-o", timing] + args,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wchar = 0
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                child = f.read().split()[0]
            with open(f"/proc/{child}/io") as f:
                for line in f:
                    if line.startswith("wchar:"):
                        wchar = int(line.split()[1])
        except (OSError, IndexError):
            pass
        time.sleep(0.05)
    wall, user, system, rss = open(timing).read().split()[-4:]
    text = gzip.open(out).read() if out.endswith(".gz") else open(out, "rb").read()
    # One line per endpoint and round, stamped with its scrape's time.
    stamps = {}
    for l in text.splitlines():
        if l.startswith(b"vllm:num_requests_running"):
            key, _value, t = l.rsplit(b" ", 2)
            stamps.setdefault(key, []).append(float(t))
    lines = sum(len(v) for v in stamps.values())
    # The schedule: the largest distance between two rounds of one endpoint, and the rounds
    # more than half an interval late.
    gaps = [b - a for v in stamps.values() for a, b in zip(sorted(v), sorted(v)[1:])]
    return {
        "wall": float(wall),
        "cpu": float(user) + float(system),
        "sys": float(system),
        "peak_mb": int(rss) / 1024,
        "wrote_mb": wchar / 1e6,
        "file_mb": len(text) / 1e6,
        "rounds": lines / len(urls),
        "max_gap": max(gaps, default=0.0),
        "late": sum(1 for g in gaps if g > 1.5 * interval) / max(len(stamps), 1),
        "code": p.returncode,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoints", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--gzip", action="store_true", help="record to a .om.gz file")
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        rows = one_replica_page(work)
        servers = serve(rows, a.endpoints)
        urls = [f"http://127.0.0.1:{s.server_address[1]}/metrics" for s in servers]
        print(f"{a.endpoints} endpoints of {sum(1 for r in rows if r[1] is not None)} series, "
              f"{a.rounds} rounds every {a.interval} s")
        for i in range(a.repeat):
            for b in a.binaries:
                name = "rec.om.gz" if a.gzip else "rec.om"
                r = run(b, urls, a.rounds, a.interval, os.path.join(work, name))
                print(f"  {b}: wall {r['wall']:.1f} s, cpu {r['cpu']:.1f} s (system {r['sys']:.1f} s), peak {r['peak_mb']:.0f} MB, "
                      f"wrote {r['wrote_mb']:.0f} MB, file {r['file_mb']:.1f} MB, {r['rounds']:.0f} rounds, "
                      f"largest gap {r['max_gap']:.2f} s, {r['late']:.0f} rounds late, exit {r['code']}",
                      flush=True)
        for s in servers:
            s.shutdown()


if __name__ == "__main__":
    main()
