#!/usr/bin/env python3
"""Live triage on the corpus: does `diagnose --prometheus` reach the verdict `eval` reaches from
the recording?

Each case's recording is backfilled into a fresh, real Prometheus (promtool, then `prometheus` on
127.0.0.1), and the same binary diagnoses it twice with the case's own window, end, serve command
line, facts and signals: once from the file, once from Prometheus. Printed per case: the label,
both verdicts (status and ranked causes), and `same` (identical), `top` (same status and first
cause, other causes differ) or `DIFF`; then the counts.

    python3 scripts/corpus/live_eval.py [--split train|test] [--only SUBSTRING] [--bin PATH]

Needs `prometheus` and `promtool` (scripts/install-test-servers.sh) and PyYAML. Starts and stops
its own servers; leaves nothing running.
"""
import argparse
import glob
import gzip
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import yaml

RANK = {'healthy': 0, 'unknown': 0, 'degraded': 1, 'critical': 2}


def recording_text(path):
    data = open(path, 'rb').read()
    if path.endswith('.gz'):
        data = gzip.decompress(data)
    text = data.decode()
    # promtool needs the OpenMetrics end marker.
    return text if '# EOF' in text else text + '# EOF\n'


def sample_span_ms(text):
    """Oldest and newest sample timestamps (ms) of an OpenMetrics text with timestamps."""
    lo = hi = None
    for line in text.splitlines():
        if not line or line[0] == '#':
            continue
        try:
            ms = round(float(line.rsplit(' ', 1)[1]) * 1000)
        except (IndexError, ValueError):
            continue
        lo = ms if lo is None else min(lo, ms)
        hi = ms if hi is None else max(hi, ms)
    return lo, hi


def verdict(stdout):
    """(status, [causes]) of the worst target, as `eval` scores a case."""
    targets = json.loads(stdout)['targets']
    if not targets:
        return ('no target', [])
    worst = max(targets, key=lambda t: RANK.get(t['status'], 0))
    return (worst['status'], [c['id'] for c in worst['causes']])


class Prometheus:
    def __init__(self, text, work):
        data = os.path.join(work, 'data')
        shutil.rmtree(data, ignore_errors=True)
        om = os.path.join(work, 'in.om')
        open(om, 'w').write(text)
        subprocess.run(['promtool', 'tsdb', 'create-blocks-from', 'openmetrics', om, data],
                       capture_output=True, check=True)
        config = os.path.join(work, 'prometheus.yml')
        open(config, 'w').write('global:\n  scrape_interval: 1h\n')
        s = socket.socket()
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
        s.close()
        self.url = f'http://127.0.0.1:{port}'
        self.process = subprocess.Popen(
            ['prometheus', f'--config.file={config}', f'--storage.tsdb.path={data}',
             '--storage.tsdb.retention.time=100y', f'--web.listen-address=127.0.0.1:{port}'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                urllib.request.urlopen(self.url + '/-/ready', timeout=1)
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError('prometheus did not become ready')

    def stop(self):
        self.process.terminate()
        self.process.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--bin', default='./target/release/llm-doctor')
    ap.add_argument('--split', choices=['train', 'test'])
    ap.add_argument('--only', default='', help='cases whose id contains this')
    ap.add_argument('--corpus', default='corpus')
    a = ap.parse_args()
    cmd = [a.bin, 'eval', a.corpus, '--format', 'json'] + (['--split', a.split] if a.split else [])
    scored = {c['id']: c for c in json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                                            check=True).stdout)['cases']}
    work = tempfile.mkdtemp()
    counts = {'same': 0, 'top': 0, 'DIFF': 0}
    try:
        for path in sorted(glob.glob(os.path.join(a.corpus, '*', '*.yaml'))):
            case = yaml.safe_load(open(path))
            if case['id'] not in scored or a.only not in case['id']:
                continue
            recording = os.path.join(os.path.dirname(path), case['recording'])
            text = recording_text(recording)
            oldest, newest = sample_span_ms(text)
            at = str(case['at']) if case.get('at') else f'{newest / 1000:.3f}'
            # As `eval`: the case's window, or the whole recording (1 ms more than its span).
            window = case.get('window') or f'{newest - oldest + 1}ms'
            args = ['--window', window, '--at', at, '--format', 'json']
            if case.get('engine_args'):
                args += ['--engine-args', case['engine_args']]
            args += [f'--fact={k}={v}' for k, v in (case.get('facts') or {}).items()]
            args += [f'--signal={k}={v}' for k, v in (case.get('signals') or {}).items()]
            prom = Prometheus(text, work)
            try:
                runs = [subprocess.run([a.bin, 'diagnose'] + source + args, capture_output=True,
                                       text=True) for source in ([recording], ['--prometheus', prom.url])]
            finally:
                prom.stop()
            got = []
            for run in runs:
                try:
                    got.append(verdict(run.stdout))
                except (ValueError, KeyError):
                    got.append(('error', [run.stderr.strip().splitlines()[-1][:80] if run.stderr.strip() else '']))
            file, live = got
            same = 'same' if file == live else (
                'top' if (file[0], file[1][:1]) == (live[0], live[1][:1]) else 'DIFF')
            counts[same] += 1
            label = case['label'].get('cause') or case['label']['verdict']
            print(f"{case['id']:55} {scored[case['id']]['split']:5} {label:28} "
                  f"file {file[0]} {','.join(file[1][:3]) or '-'} | live {live[0]} "
                  f"{','.join(live[1][:3]) or '-'} | {same}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = sum(counts.values())
    print(f"\n{total} cases: {counts['same']} identical, {counts['top']} same status and first "
          f"cause, {counts['DIFF']} different")


if __name__ == '__main__':
    main()
