#!/usr/bin/env python3
"""Sends every query of one live triage again as a range query, to measure the other design of
`postmortem --prometheus` (docs/benchmarks-history.md): Prometheus evaluating each signal at every
step, instead of the raw series fetched once per adapter and judged by llm-doctor.

Usage: bench-triage-as-range.py QUERY_LOG URL START END STEP [IN_FLIGHT]
QUERY_LOG is a Prometheus `query_log_file` holding one triage's instant queries only
(`diagnose --prometheus URL --at END`), START/END Unix seconds. Prints the wall time of all
queries with IN_FLIGHT (default 8) at once, the slowest, the answers' size, and the queries
Prometheus refuses as range queries (range vectors: the raw samples a triage evaluates itself).
"""
import concurrent.futures
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def main():
    if len(sys.argv) not in (6, 7):
        sys.exit(__doc__)
    log, url, start, end, step = sys.argv[1:6]
    in_flight = int(sys.argv[6]) if len(sys.argv) > 6 else 8
    queries = [json.loads(line)["params"]["query"] for line in open(log)]

    def send(q):
        data = urllib.parse.urlencode({"query": q, "start": start, "end": end, "step": step}).encode()
        t = time.time()
        try:
            body, err = urllib.request.urlopen(url + "/api/v1/query_range", data, timeout=600).read(), None
        except urllib.error.HTTPError as e:
            body, err = b"", json.loads(e.read()).get("error", "") or str(e)
        except urllib.error.URLError as e:
            body, err = b"", str(e.reason)
        return time.time() - t, len(body), err, q

    t = time.time()
    with concurrent.futures.ThreadPoolExecutor(in_flight) as pool:
        results = list(pool.map(send, queries))
    wall = time.time() - t
    ok = [r for r in results if r[2] is None]
    if not ok:
        sys.exit("no query was answered as a range query: %s" % results[0][2] if results else "no queries in " + log)
    print("%d queries, %d in flight: wall %.2f s, slowest %.2f s, %d answered (%.1f MB), %d refused"
          % (len(queries), in_flight, wall, max(r[0] for r in ok), len(ok),
             sum(r[1] for r in ok) / 1e6, len(results) - len(ok)))
    for r in sorted(ok, reverse=True)[:5]:
        print("  %.2f s  %5.1f MB  %s" % (r[0], r[1] / 1e6, r[3][:100]))
    for r in results:
        if r[2] is not None:
            print("  refused: %s  %s" % (r[2][:60], r[3][:80]))


if __name__ == "__main__":
    main()
