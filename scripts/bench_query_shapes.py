#!/usr/bin/env python3
"""Replays one live triage's queries against a Prometheus in other shapes, to measure a query
design before building it (docs/benchmarks-history.md, "Other shapes of the same queries").

The queries are taken from Prometheus' query log (`query_log_file`) of one
`llm-doctor diagnose --prometheus URL --at T` run (the first N lines: the triage's own count).

  fold   URL LOG N AT       the triage's queries as sent (discovery, then the rest, 16 in
                            flight), against the same with the instant-vector queries joined into
                            K queries with `or`, each part marked by `label_replace`: wall time,
                            slowest query, their ratio, three rounds.
  range  URL LOG N FROM TO STEP
                            the signal queries as range queries over FROM..TO at STEP (what
                            `postmortem --prometheus` would send with one query per signal),
                            16 in flight; raw-sample queries as one range-vector selector over the
                            span; against the raw series of each engine as one query (what it
                            sends now). Discovery, info and version queries are left out.
"""
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

MARK = "llm_doctor_signal"


def queries(log, n):
    return [json.loads(line)["params"]["query"] for line in open(log)][:n]


def is_raw(q):
    return q.startswith("{") and q.endswith("]")


def is_discovery(q):
    return q.startswith("count by") or q.startswith('{__name__="')


def send(url, path, params):
    started = time.time()
    data = urllib.parse.urlencode(params).encode()
    try:
        body = urllib.request.urlopen(url + path, data).read()
    except urllib.error.HTTPError as e:
        sys.exit(f"HTTP {e.code} for {params['query'][:100]}: {e.read()[:200]!r}")
    return time.time() - started, len(body)


def fold(parts, k):
    groups = [[] for _ in range(k)]
    for i, q in enumerate(parts):
        groups[i % k].append(f'label_replace({q}, "{MARK}", "s{i}", "", "")')
    return [" or ".join(g) for g in groups if g]


def fold_mode(url, log, n, at):
    qs = queries(log, n)
    discovery = [q for q in qs if is_discovery(q)]
    raw = [q for q in qs if q not in discovery and is_raw(q)]
    instant = [q for q in qs if q not in discovery and q not in raw]
    run = lambda q: send(url, "/api/v1/query", {"query": q, "time": at})
    print(f"{len(discovery)} discovery, {len(raw)} raw-sample, {len(instant)} instant-vector queries")
    for round_ in range(3):
        for k in (0, 2, 4, 8):
            started = time.time()
            with ThreadPoolExecutor(16) as pool:
                first = list(pool.map(run, discovery))
                rest = list(pool.map(run, raw + (fold(instant, k) if k else instant)))
            wall = time.time() - started
            slowest = max(t for t, _ in first + rest)
            shape = f"folded into {k}" if k else "as sent"
            print(f"  round {round_ + 1}, {shape:>14}: {len(first) + len(rest):3} queries, "
                  f"wall {wall * 1000:4.0f} ms, slowest {slowest * 1000:4.0f} ms, "
                  f"ratio {wall / slowest:.2f}")


def range_mode(url, log, n, start, end, step):
    qs = [q for q in queries(log, n) if not is_discovery(q)]
    span = int(float(end) - float(start)) + 300

    def run(q):
        if is_raw(q):
            selector = q[: q.rindex("[")]
            return send(url, "/api/v1/query", {"query": f"{selector}[{span}s]", "time": end})
        return send(url, "/api/v1/query_range", {"query": q, "start": start, "end": end, "step": step})

    for round_ in range(2):
        started = time.time()
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(run, qs))
        wall = time.time() - started
        slowest = max(t for t, _ in answers)
        size = sum(b for _, b in answers) / 1e6
        print(f"  round {round_ + 1}, one range query per signal: {len(qs)} queries, wall {wall:.2f} s, "
              f"slowest {slowest:.2f} s, {size:.0f} MB of JSON")
        serial = sum(t for t, _ in answers)
        print(f"           (sum of their times in flight: {serial:.2f} s)")
    for engine in ('{__name__=~"vllm:.+|process_cpu_seconds_total"}',):
        t, b = send(url, "/api/v1/query", {"query": f"{engine}[{span}s]", "time": end})
        print(f"  the engine's raw series over the span, one query: {t:.2f} s, {b / 1e6:.0f} MB of JSON")


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "fold" and len(args) == 4:
        fold_mode(args[0], args[1], int(args[2]), args[3])
    elif mode == "range" and len(args) == 6:
        range_mode(args[0], args[1], int(args[2]), *args[3:])
    else:
        sys.exit(__doc__)
