#!/usr/bin/env python3
"""One objective for the llama.cpp family's labels and verdicts (run once over the committed cases).

The family's healthy predicate has always been its objective: every request answered, none cut,
the client's TTFT p50 under 1 s and p99 under 4 s, at least 95 % of the offered rate served. The
CPU-contention runs were labelled against a control run instead (TTFT p99 >= 2x the control's,
or e2e p99 >= 1.5x, or served < 90 %), so a run could be a "fault" while meeting the objective
the family's healthy runs are held to. This script, reading only each case's own ground truth
and recording (never llm-doctor's output):

- states the objective the product can name in every case (`slos: {ttft_p99_seconds: 4}`; the
  p50 half stays in the predicate, since no `--slo` names a median);
- relabels a contention "fault" that met the objective as a near miss: the neighbour slowed it
  against its control, but not past what the deployment asks;
- labels `untraceable` a contention fault whose recording holds no per-replica CPU measure (no
  cAdvisor series: the host's pressure reads the same whether the neighbour shares the replica's
  core or runs beside it) and whose slot waits were a tail (at most two requests waited over 1 s
  for a slot, by the client's records): its bite was the replica's own slower prefill and decode,
  which llama.cpp exports as a speed with no baseline and no latency;
- labels `untraceable` a backlog fault of fewer than 50 requests, every one answered and the
  offered rate served, whose median request came in under half the TTFT objective (p50 under
  2 s): the objective was missed on a p99 that rests on
  the slowest one or two requests, a tail llama.cpp's 1 s deferred-requests gauge cannot tell
  from a healthy run's. This is the rule the nine tail-only backlogs were labelled by on
  2026-12-06, written down so that later runs get it too.

Usage: python3 scripts/corpus/llamacpp_objective.py [CORPUS_DIR]   (default corpus/llamacpp)
"""
import glob
import gzip
import os
import re
import sys

import yaml

OBJECTIVE = {"ttft_p99_seconds": 4.0}
CONTENTION = "competing stress-ng"


def served_whole(gt):
    """(every request answered, none cut, 95 % of the offered rate served; its numbers)."""
    errors = sum(v for k, v in (gt.get("errors_by_status") or {}).items() if str(k) != "200")
    cut = gt.get("cut_at_context_limit") or 0
    served, offered = gt.get("served_rps") or 0.0, gt.get("offered_rps") or 0.0
    return errors == 0 and cut == 0 and served >= 0.95 * offered, (errors, cut, served, offered)


def meets_objective(gt):
    whole, (errors, cut, served, offered) = served_whole(gt)
    t50, t99 = gt.get("client_ttft_p50_s") or 0.0, gt.get("client_ttft_p99_s") or 0.0
    ok = whole and t50 < 1.0 and t99 < 4.0
    why = ("%d errors, %d cut; client TTFT p50 %.2f s and p99 %.2f s (objective: under 1 s and 4 s); "
           "served %.3f of %.3f rps offered (objective: 95 %%)" % (errors, cut, t50, t99, served, offered))
    return ok, why


def has_replica_cpu(recording):
    with gzip.open(recording, "rt") as fh:
        return any(line.startswith("container_cpu") for line in fh)


def dump_block(key, value):
    return yaml.safe_dump({key: value}, width=10**6, sort_keys=False, allow_unicode=True)


def relabel(path):
    text = open(path).read()
    case = yaml.safe_load(text)
    label, gt = case["label"], case.get("ground_truth") or {}
    changed = []
    if "slos" not in case:
        text = re.sub(r"(?m)^(engine_args: .*\n)", lambda m: m.group(1) + dump_block("slos", OBJECTIVE),
                      text, count=1)
        changed.append("slos")
    contention = label.get("predicate", "").startswith(CONTENTION)
    if contention and label["verdict"] == "fault" and not label.get("untraceable"):
        ok, why = meets_objective(gt)
        recording = os.path.join(os.path.dirname(path), case["recording"])
        waiting = gt.get("requests_waiting_over_1s")
        if ok:
            label = {"verdict": "near_miss",
                     "predicate": label["predicate"].split(": degraded (")[0]
                     + ": slower than its control, but it met the family's objective: " + why}
            changed.append("near_miss")
        elif waiting is not None and waiting <= 2 and not has_replica_cpu(recording):
            label = dict(label)
            label["untraceable"] = (
                "the neighbour slowed the replica's own prefill and decode (%s), and only %d "
                "request(s) waited over 1 s for a slot (a tail a 1 s deferred-requests gauge "
                "may not see); llama.cpp exports its speed with no baseline and no latency, and "
                "the recording holds no per-replica CPU measure (no cAdvisor series), only the "
                "host's, which reads the same whether the neighbour shares the replica's core or "
                "not" % (why, waiting))
            changed.append("untraceable")
    n, t50, t99 = gt.get("requests_sent"), gt.get("client_ttft_p50_s"), gt.get("client_ttft_p99_s")
    tail_only = (label["verdict"] == "fault" and label.get("cause") == "queue_backlog"
                 and not label.get("untraceable")
                 and None not in (n, t50, t99) and n < 50
                 and t50 < OBJECTIVE["ttft_p99_seconds"] / 2
                 and served_whole(gt)[0])
    if tail_only:
        label = dict(label)
        label["untraceable"] = (
            "a tail of one or two requests: the client's TTFT p99 of %d requests (%.3f s, against a "
            "p50 of %s s) interpolates between the slowest two, and llama.cpp exports no latency "
            "histogram, only a deferred-requests gauge that a 1 s scrape samples; no number the "
            "engine exports can tell such a tail from a healthy run's (the 2026-12-06 rule: fewer "
            "than 50 requests, the median under half the objective; label unchanged)"
            % (n, t99, t50))
        changed.append("untraceable")
    if changed and changed[-1] != "slos":
        text = re.sub(r"(?ms)^label:\n.*?(?=^ground_truth:)", lambda m: dump_block("label", label),
                      text, count=1)
    if changed:
        open(path, "w").write(text)
        yaml.safe_load(open(path))  # still one document
    return changed


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "corpus/llamacpp"
    for path in sorted(glob.glob(os.path.join(folder, "*.yaml"))):
        changed = relabel(path)
        if changed and changed != ["slos"]:
            print(os.path.basename(path), " ".join(changed))


if __name__ == "__main__":
    main()
