"""Write recorded runs as gzip OpenMetrics: what Prometheus would have scraped, with timestamps.

Shared by the corpus generators (Vidur replay, llama.cpp scrapes, report transcriptions) so every
recording has the same shape: one family after another, samples in time order, timestamps in
seconds, `# EOF` at the end. llm-doctor reads it, and so does
`promtool tsdb create-blocks-from openmetrics`.
"""

import gzip
import math
import re


def fmt(value):
    """A sample value as OpenMetrics writes it (shortest repr; +Inf/-Inf/NaN spelled out)."""
    if not isinstance(value, (int, str)):
        value = float(value)  # numpy scalars print as np.float64(...) otherwise
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        if value == int(value) and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    return str(value)


def labels_text(labels):
    if not labels:
        return ""
    inner = ",".join(
        '%s="%s"' % (k, str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n"))
        for k, v in sorted(labels.items())
    )
    return "{" + inner + "}"


class Recording:
    """Collects samples per family and writes them family by family.

    Families: `counter(name)` (samples written as name_total), `gauge(name)`, `histogram(name,
    buckets)` (cumulative _bucket/_sum/_count), `info(name)` (name_info = 1).
    """

    def __init__(self):
        self.families = {}  # name -> (type, help, {labels_tuple: [(ts, suffix, extra_labels, value)]})
        self.order = []

    def _family(self, name, kind, help_text):
        if name not in self.families:
            self.families[name] = (kind, help_text, [])
            self.order.append(name)
        return self.families[name][2]

    def counter(self, name, ts, value, labels=None, help_text=""):
        self._family(name, "counter", help_text).append((ts, name + "_total", labels or {}, value))

    def gauge(self, name, ts, value, labels=None, help_text=""):
        self._family(name, "gauge", help_text).append((ts, name, labels or {}, value))

    def info(self, name, ts, labels, help_text=""):
        self._family(name, "info", help_text).append((ts, name + "_info", labels, 1))

    def histogram(self, name, ts, bounds, counts, total, labels=None, help_text=""):
        """`counts` are cumulative counts per bound in `bounds` (ending with +Inf)."""
        rows = self._family(name, "histogram", help_text)
        labels = labels or {}
        for bound, count in zip(bounds, counts):
            le = "+Inf" if math.isinf(bound) else fmt(float(bound))
            rows.append((ts, name + "_bucket", dict(labels, le=le), count))
        rows.append((ts, name + "_sum", labels, total))
        rows.append((ts, name + "_count", labels, counts[-1]))

    def text(self):
        out = []
        for name in self.order:
            kind, help_text, rows = self.families[name]
            out.append("# TYPE %s %s\n" % (name, kind))
            if help_text:
                out.append("# HELP %s %s\n" % (name, help_text))
            # One series after another, each in time order (OpenMetrics wants a family's
            # samples together; Prometheus' importer accepts series interleaved or not).
            series = {}
            for ts, sample, labels, value in rows:
                series.setdefault((sample, tuple(sorted(labels.items()))), []).append((ts, value))
            for (sample, labels), points in series.items():
                lt = labels_text(dict(labels))
                for ts, value in sorted(points, key=lambda p: p[0]):
                    out.append("%s%s %s %s\n" % (sample, lt, fmt(value), fmt(ts)))
        out.append("# EOF\n")
        return "".join(out)

    def write(self, path):
        data = self.text().encode()
        # mtime=0: the same run writes the same bytes.
        with open(path, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
                gz.write(data)


SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_text(text):
    """A scraped exposition as (types by family, helps by family, [(name, labels, value)])."""
    types, helps, samples = {}, {}, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            types[name] = kind.strip()
        elif line.startswith("# HELP "):
            parts = line.split(None, 3)
            helps[parts[2]] = parts[3] if len(parts) > 3 else ""
        elif line and not line.startswith("#"):
            m = SAMPLE_RE.match(line)
            if m:
                labels = dict(LABEL_RE.findall(m.group(3) or ""))
                samples.append((m.group(1), labels, float(m.group(4))))
    return types, helps, samples
