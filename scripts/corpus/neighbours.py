"""A noisy neighbour beside a replica, and what a node's monitoring would see of it.

Shared by the real-engine run scripts (llamacpp_runs.py, vllm_runs.py): the competing load
(stress-ng, optionally pinned and part-time), node_exporter's view of the host, and cAdvisor's
view of the two pods (each in a cgroup of its own: CPU pressure and usage per container).
"""
import os
import re
import subprocess
import threading
import time
import urllib.request

from openmetrics import parse_text

NODE_EXPORTER = "prometheus-node-exporter"

# The host's series a recording keeps of node_exporter's answer.
NODE_KEEP = {"node_cpu_seconds_total", "node_pressure_cpu_waiting_seconds_total", "node_load1",
             "node_load5", "node_load15", "node_memory_MemAvailable_bytes",
             "node_memory_MemTotal_bytes"}

# Two pods on one node, as the kubelet's cAdvisor (/metrics/cadvisor) names their containers.
# The cgroups live in this machine's cgroup2 hierarchy, which accounts CPU pressure (PSI) and
# usage per cgroup; its CPU controller stays in cgroup v1 here, so moving a process into one
# changes no scheduling, only what is counted.
CGROUP_ROOT = "/sys/fs/cgroup/unified/llm-doctor-corpus"
CADVISOR_FAMILIES = [
    ("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.",
     "cpu.stat", "usage_usec"),
    ("container_pressure_cpu_waiting_seconds_total",
     "Total time duration tasks in the container have waited due to CPU congestion.",
     "cpu.pressure", "some"),
    ("container_pressure_cpu_stalled_seconds_total",
     "Total time duration no tasks in the container could make progress due to CPU congestion.",
     "cpu.pressure", "full"),
]


def host_labels(host):
    """The job and instance labels Prometheus gives the node's two exporters."""
    return {"node": {"job": "node", "instance": host + ":9100"},
            "kubelet": {"job": "kubelet", "instance": host + ":10250"}}


def add_host_scrape(rec, t, labels, job, body):
    """One scrape of node_exporter (the NODE_KEEP names only) or of cAdvisor into the recording
    `rec` (openmetrics.Recording) as Prometheus would have stored it: `up`, then the samples with
    the exporter's job and instance (`labels`, as host_labels gives them). Their counters all end
    in `_total`."""
    rec.gauge("up", t, 1 if body is not None else 0, labels, "1 if the scrape succeeded")
    if body is None:
        return
    types, helps, samples = parse_text(body)
    for name, sample_labels, value in samples:
        if job == "node" and name not in NODE_KEEP:
            continue
        full = dict(sample_labels, **labels)
        if types.get(name) == "counter" and name.endswith("_total"):
            rec.counter(name[:-6], t, value, full, helps.get(name, ""))
        else:
            rec.gauge(name, t, value, full, helps.get(name, ""))


def pinned(argv, cpus):
    """`argv` run on the CPUs listed (taskset -c), or anywhere when none are."""
    return argv if cpus is None else ["taskset", "-c", str(cpus)] + argv


def stress_argv(cont, seconds):
    """The competing process: `cont` = {workers, nice, load (% busy, or None), cpus}."""
    duty = ["--cpu-load", str(cont["load"])] if cont.get("load") is not None else []
    return pinned(["nice", "-n", str(cont["nice"]), "stress-ng", "--cpu", str(cont["workers"])]
                  + duty + ["--cpu-method", "matrixprod", "--timeout", "%ds" % seconds],
                  cont.get("cpus"))


def start_node_exporter(port):
    return subprocess.Popen([NODE_EXPORTER, "--web.listen-address=127.0.0.1:%d" % port,
                             "--collector.disable-defaults", "--collector.cpu",
                             "--collector.pressure", "--collector.loadavg",
                             "--collector.meminfo"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def cgroup_dir(name):
    return os.path.join(CGROUP_ROOT, name)


def make_cgroups(pods):
    for name in pods:
        os.makedirs(cgroup_dir(name), exist_ok=True)


def remove_cgroups(pods):
    for name in pods:
        try:
            os.rmdir(cgroup_dir(name))
        except OSError:
            pass


def into_cgroup(name):
    """A preexec_fn: the child (and all it starts) joins cgroup `name` before it execs."""
    def join():
        with open(os.path.join(cgroup_dir(name), "cgroup.procs"), "w") as fh:
            fh.write("0")
    return join


def cadvisor_text(pods):
    """What cAdvisor would export of the pods' cgroups now (microseconds read as seconds).
    `pods`: cgroup name -> its container labels (container, pod, namespace, image)."""
    out = []
    for family, help_text, fname, key in CADVISOR_FAMILIES:
        out.append("# HELP %s %s" % (family, help_text))
        out.append("# TYPE %s counter" % family)
        for name, lab in pods.items():
            with open(os.path.join(cgroup_dir(name), fname)) as fh:
                text = fh.read()
            if fname == "cpu.stat":
                usec = int(re.search(r"^%s (\d+)$" % key, text, re.M).group(1))
            else:
                usec = int(re.search(r"^%s .*total=(\d+)$" % key, text, re.M).group(1))
            labels = dict(lab, id="/llm-doctor-corpus/" + name, name=name)
            out.append("%s{%s} %.6f" % (family, ",".join('%s="%s"' % kv for kv in sorted(labels.items())),
                                        usec / 1e6))
    return "\n".join(out) + "\n"


class Scraper(threading.Thread):
    """Scrapes targets every second; keeps (ts, job, text or None) in memory. A target is
    (job, URL) or (job, a function returning the text)."""

    def __init__(self, targets):
        super().__init__(daemon=True)
        self.targets = targets
        self.scrapes = []
        self.stop_ev = threading.Event()

    def run(self):
        nxt = time.time()
        while not self.stop_ev.is_set():
            for job, url in self.targets:
                ts = time.time()
                try:
                    if callable(url):
                        body = url()
                    else:
                        with urllib.request.urlopen(url, timeout=0.9) as r:
                            body = r.read().decode(errors="replace") if r.status == 200 else None
                except Exception:
                    body = None
                self.keep(ts, job, body)
            nxt += 1.0
            delay = nxt - time.time()
            if delay < 0:
                nxt = time.time()
                delay = 0
            self.stop_ev.wait(delay)

    def keep(self, ts, job, body):
        self.scrapes.append((ts, job, body))
