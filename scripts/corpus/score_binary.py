"""Scores an llm-doctor binary's `diagnose` on the corpus the way `llm-doctor eval` does (the
whole recording, the case's command line, facts and signals; the worst target; the same hashed
split), for binaries that predate `eval`, so a change can be compared with what came before on
the same runs. Usage: python3 scripts/corpus/score_binary.py BINARY corpus"""
import gzip, json, subprocess, sys, yaml, pathlib

def fnv(i):
    h = 0xcbf29ce484222325
    for b in i.encode():
        h ^= b; h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return 'test' if h % 3 == 0 else 'train'

binary, root = sys.argv[1], pathlib.Path(sys.argv[2])
rows = []
for case_file in sorted(root.rglob('*.yaml')):
    c = yaml.safe_load(open(case_file))
    if not isinstance(c, dict) or 'label' not in c:
        continue
    rec = case_file.parent / c['recording']
    ts = [float(l.split()[-1]) for l in gzip.open(rec, 'rt') if l[0] != '#' and len(l.split()) >= 3]
    span_ms = int((max(ts) - min(ts)) * 1000) + 1
    args = [binary, 'diagnose', str(rec), '--format', 'json', '--window', '%dms' % span_ms]
    if c.get('engine_args'): args += ['--engine-args', c['engine_args']]
    for k, v in (c.get('facts') or {}).items():
        args += ['--fact', '%s=%s' % (k, str(v).lower() if isinstance(v, bool) else v)]
    for k, v in (c.get('signals') or {}).items():
        args += ['--signal', '%s=%s' % (k, v)]
    out = subprocess.run(args, capture_output=True, text=True)
    try:
        t = sorted(json.loads(out.stdout)['targets'], key=lambda t: ['healthy','unknown','degraded','critical'].index(t['status']))[-1]
    except Exception:
        rows.append((c['id'], 'error', out.stderr.strip()[:100])); continue
    causes = [x['id'] for x in t['causes']]
    faults = [x for x in t['causes'] if x.get('severity', 'fault') == 'fault']
    lab = c['label']
    if lab['verdict'] == 'fault':
        r = 'top1' if causes[:1] == [lab['cause']] else ('top3' if lab['cause'] in causes[:3] else 'miss')
    else:
        r = 'alarm' if t['status'] in ('degraded', 'critical') or faults else 'quiet'
    rows.append((c['id'], fnv(c['id']), c['family'], lab['verdict'], r))
import collections
for split in ('all', 'train', 'test'):
    sel = [r for r in rows if len(r) == 5 and (split == 'all' or r[1] == split)]
    f = [r for r in sel if r[3] == 'fault']; q = [r for r in sel if r[3] != 'fault']
    print('%-5s cases %d  top-1 %d/%d  top-3 %d/%d  false alarms %d/%d' % (split, len(sel),
          sum(r[4] == 'top1' for r in f), len(f), sum(r[4] in ('top1', 'top3') for r in f), len(f),
          sum(r[4] == 'alarm' for r in q), len(q)))
for fam in ('llamacpp', 'report', 'vidur'):
    sel = [r for r in rows if len(r) == 5 and r[2] == fam]
    f = [r for r in sel if r[3] == 'fault']; q = [r for r in sel if r[3] != 'fault']
    print('  %-9s top-1 %d/%d  false alarms %d/%d' % (fam, sum(r[4] == 'top1' for r in f), len(f), sum(r[4] == 'alarm' for r in q), len(q)))
print('errors:', [r for r in rows if len(r) != 5])
