#!/usr/bin/env python3
"""Rewrites corpus cases as a coarser scrape would have recorded them.

For each series of a case's recording, the first sample in each K-second slot (slots counted
from the recording's first timestamp) is kept: what a scrape every K seconds would have read
of the same run, its labels unchanged. Request logs and traces are left out, so the verdict is
the metrics' alone. The result is a corpus `llm-doctor eval DIR` scores like the real one.

    python3 scripts/corpus/resample.py corpus /tmp/v15 15 vllm llamacpp
    llm-doctor eval /tmp/v15 --summary
"""
import gzip
import os
import sys

import yaml


def sample(line):
    """(series, timestamp) of a sample line, None for one without a timestamp. An exemplar
    (after " # ") is not part of the sample; the series (name and labels, whose values may hold
    spaces) is what stands before the value."""
    head = line.split(" # ", 1)[0].rstrip()
    parts = head.rsplit(" ", 2)
    if len(parts) < 3:
        return None
    try:
        float(parts[1])
        return parts[0], float(parts[2])
    except ValueError:
        return None


def resample(lines, every):
    samples = [sample(line) for line in lines]
    stamps = [s[1] for line, s in zip(lines, samples) if s and line[0] != "#"]
    if not stamps:
        return lines
    t0, seen, out = min(stamps), set(), []
    for line, s in zip(lines, samples):
        # Comments, `# EOF` and lines without a timestamp pass through as they are.
        if not line or line[0] == "#" or s is None:
            out.append(line)
            continue
        slot = (s[0], int((s[1] - t0) // every))
        if slot not in seen:
            seen.add(slot)
            out.append(line)
    return out


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    src, dst, every, families = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
    os.makedirs(dst, exist_ok=True)
    for family in families:
        folder = os.path.join(src, family)
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".yaml"):
                continue
            with open(os.path.join(folder, name)) as fh:
                case = yaml.safe_load(fh)
            with gzip.open(os.path.join(folder, case["recording"]), "rt") as fh:
                lines = fh.read().splitlines()
            case.pop("requests", None)
            case["recording"] = name[:-len(".yaml")] + ".om.gz"
            with gzip.open(os.path.join(dst, case["recording"]), "wt") as fh:
                fh.write("\n".join(resample(lines, every)) + "\n")
            with open(os.path.join(dst, name), "w") as fh:
                yaml.safe_dump(case, fh, sort_keys=False)


if __name__ == "__main__":
    main()
