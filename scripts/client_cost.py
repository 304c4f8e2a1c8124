#!/usr/bin/env python3
"""The client's own cost of a command that queries a metrics store (BENCHMARKS.md): runs the
command, measuring its wall time, CPU time (user + sys) and peak memory, and the store's CPU
time meanwhile (from /proc); then replays the queries the store logged for it (Prometheus'
`query_log_file`), one after another with curl, and reports the two ratios the fleet-postmortem
work set: whole run / replay (goal <= 1.25: the client adds at most a quarter on top of the
store) and client CPU / store CPU (goal <= 0.25), the store's CPU measured both during the
command and during the replay.

    scripts/client_cost.py --url URL --store-pid PID --log QUERY_LOG [--replay-log LOG] [--repeat N] -- CMD...

--replay-log replays another log's queries. VictoriaMetrics has no query log: start it with
`-search.logSlowQueryDuration=1us` and give its log as --vm-log (the lines it adds while the
command runs are replayed). Prints one line of JSON a run (--repeat N: N runs, then their
medians).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def replay(url, log):
    queries = [json.loads(line)["params"] for line in open(log) if line.strip()]
    started = time.time()
    for p in queries:
        if p.get("step"):
            args = ["--data-urlencode", f"query={p['query']}", "--data-urlencode", f"start={p['start']}",
                    "--data-urlencode", f"end={p['end']}", "--data-urlencode", f"step={p['step']}s",
                    f"{url}/api/v1/query_range"]
        else:
            args = ["--data-urlencode", f"query={p['query']}", "--data-urlencode", f"time={p['end']}",
                    f"{url}/api/v1/query"]
        subprocess.run(["curl", "-sf", "-o", "/dev/null", "-X", "POST"] + args, check=True)
    return time.time() - started, len(queries)


def replay_vm(url, log, offset):
    """The requests VictoriaMetrics logged after byte `offset` of its log, replayed in order."""
    with open(log, "rb") as f:
        f.seek(offset)
        lines = f.read().decode("utf-8", "replace").splitlines()
    uris = [m.group(1) for line in lines if (m := re.search(r'requestURI: "([^"]+)"', line))]
    started = time.time()
    for uri in uris:
        subprocess.run(["curl", "-s", "-o", "/dev/null", url + uri], check=True)
    return time.time() - started, len(uris)


def measure(a, cmd):
    """One run of the command and one replay of its queries: the figures of one line."""
    if a.log:
        open(a.log, "w").close()
    offset = os.path.getsize(a.vm_log) if a.vm_log else 0
    store_before = cpu_seconds(a.store_pid)
    started = time.time()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.time() - started
    store_cpu = cpu_seconds(a.store_pid) - store_before
    client_cpu = usage.ru_utime + usage.ru_stime
    replay_log = a.replay_log or a.log
    if replay_log and not a.replay_log:
        # The replay appends its own queries to the store's log: replay a copy.
        with open(a.log) as f:
            queries = f.read()
        replay_log = a.log + ".replayed"
        with open(replay_log, "w") as f:
            f.write(queries)
    store_before_replay = cpu_seconds(a.store_pid)
    if a.vm_log:
        alone, n = replay_vm(a.url, a.vm_log, offset)
    else:
        alone, n = replay(a.url, replay_log)
    # The store's CPU for the same queries sent again one at a time: a second measure of its
    # share (here the store's CPU for the same queries moves by half from run to run).
    replay_store_cpu = cpu_seconds(a.store_pid) - store_before_replay
    return {
        "exit": os.waitstatus_to_exitcode(status),
        "wall_s": round(wall, 3),
        "client_cpu_s": round(client_cpu, 3),
        "peak_mb": round(usage.ru_maxrss / 1024, 1),
        "store_cpu_s": round(store_cpu, 3),
        "queries": n,
        "replay_s": round(alone, 3),
        "whole_over_replay": round(wall / alone, 2) if alone else None,
        "client_over_store_cpu": round(client_cpu / store_cpu, 2) if store_cpu else None,
        "replay_store_cpu_s": round(replay_store_cpu, 3),
        "client_over_replay_store_cpu": round(client_cpu / replay_store_cpu, 2) if replay_store_cpu else None,
    }


def median(values):
    v = sorted(values)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--store-pid", type=int, required=True)
    ap.add_argument("--log", help="the store's query log (emptied before the command)")
    ap.add_argument("--replay-log", help="replay this log's queries instead of --log's")
    ap.add_argument("--vm-log", help="VictoriaMetrics' log (-search.logSlowQueryDuration=1us)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of the command and its replay, one after the other; with more "
                         "than one, a last line gives the medians (the store's CPU for the same "
                         "queries moves by half from run to run here, its median much less)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    runs = []
    for _ in range(max(a.repeat, 1)):
        runs.append(measure(a, cmd))
        print(json.dumps(runs[-1]), flush=True)
    if len(runs) > 1:
        m = {k: round(median([r[k] for r in runs]), 3) for k in
             ("wall_s", "client_cpu_s", "peak_mb", "store_cpu_s", "replay_s", "replay_store_cpu_s")}
        m["runs"] = len(runs)
        m["whole_over_replay"] = round(m["wall_s"] / m["replay_s"], 2) if m["replay_s"] else None
        m["client_over_store_cpu"] = (round(m["client_cpu_s"] / m["store_cpu_s"], 2)
                                      if m["store_cpu_s"] else None)
        m["client_over_replay_store_cpu"] = (round(m["client_cpu_s"] / m["replay_store_cpu_s"], 2)
                                             if m["replay_store_cpu_s"] else None)
        print(json.dumps({"median": m}))


if __name__ == "__main__":
    sys.exit(main())
