#!/usr/bin/env python3
"""adag-bench's figures as pictures: SVG plots of `adag-bench --json`.

    bench/plot.py [--hosts HOSTS.json] [--out DIR] [--machine TEXT] [--date YYYY-MM-DD]
                  BENCH.json [BENCH.json ...]

Reads the rows of one or more `adag-bench --json` outputs (their rows taken
together, e.g. a full run and `--only chain --n N` runs for more stage
counts) and, with --hosts, the object of `adag-bench-hosts --json`, and
writes into DIR (default docs/perf):

  latency.svg    round trip by payload size: adag's payload rows (process
                 actor, plain and zero-copy inputs) against the raw
                 shared-memory ping-pong (up to 1 KiB) and the time of a
                 memcpy of the same bytes (from 64 KiB), Ray Compiled Graphs
                 (the rows' "ray" figures, `--vs-ray`), and the 8 B round trip
                 across two hosts against ucx_perftest (--hosts)
  chain.svg      latency by stage count: `roundtrip` (1 stage) and `chain`
                 rows with one execution in flight, thread and process actors,
                 against the raw token relay through n + 1 processes and Ray
  allreduce.svg  allreduce bus bandwidth by size: the host communicator
                 against Open MPI (the `allreduce` rows' baseline_gbps), the
                 same allreduce inside a compiled DAG, NCCL when present
  loader.svg     the data stage's image rate (`data-images`) against its
                 ideal, Ray Data (the row's "ray") and torch's DataLoader

A plot whose rows are absent still gets written, saying "no data" and the
adag-bench command that makes them (and why rows were skipped, if they
were). Each plot's footnote names the machine (--machine, else this host:
name, CPUs, CPU model) and the date of the data (--date, else the date the
first BENCH.json was last written, UTC), so rerunning on the same JSON
writes the same bytes.

Exit status: 0, or 1 with a message naming the file on an unreadable input,
invalid JSON or JSON that is not what adag-bench writes; 2 on bad arguments.
"""

import argparse
import datetime
import json
import os
import platform
import sys
import textwrap

try:
    import matplotlib
except ImportError:
    sys.exit("plot.py: matplotlib is not installed (Debian: apt-get install python3-matplotlib)")

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

KIB = 1024
MIB = 1024 * 1024

# Same bytes for the same input: ids from a fixed salt, no date in the
# metadata, text as text (searchable, small).
matplotlib.rcParams.update({
    "svg.hashsalt": "adag-bench",
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
})

# the series' looks, the same in every plot
ADAG = dict(color="#1f77b4", marker="o")
ADAG_THREAD = dict(color="#17becf", marker="s")
ADAG_ZC = dict(color="#1f77b4", marker="^", linestyle="--")
ADAG_DAG = dict(color="#17becf", marker="s", linestyle="--")
BASE = dict(color="#7f7f7f", marker="x", linestyle=":")
BASE2 = dict(color="#bcbd22", marker="+", linestyle=":")
PEER = dict(color="#d62728", marker="D")
HOSTS = dict(color="#9467bd", marker="*", markersize=10, linestyle="none")
HOSTS_PEER = dict(color="#8c564b", marker="P", markersize=8, linestyle="none")


class InputError(Exception):
    pass


# ---- reading the inputs ----

def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not text (UTF-8): {e}")
    try:
        return text, json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})")


def json_kind(v):
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(v), "null")


def load_rows(path):
    """The rows of an `adag-bench --json` output: a list of objects, each
    with a name, params and skipped (null or why)."""
    _, data = load_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON array of adag-bench rows "
                         f"(adag-bench --json), got {json_kind(data)}")
    for i, r in enumerate(data):
        if not isinstance(r, dict) or not isinstance(r.get("name"), str) or \
                not isinstance(r.get("params"), dict) or "skipped" not in r:
            raise InputError(f"{path}: row {i} is not an adag-bench row "
                             f"(an object with name, params, skipped)")
        if r["skipped"] is None:
            for key in ("median_us", "per_s"):
                if not isinstance(r.get(key), (int, float)):
                    raise InputError(f"{path}: row {i} ({r['name']}) ran but has no "
                                     f"number {key}")
    return data


def load_hosts(path):
    """`adag-bench-hosts --json`: its object, or (None, why) when it printed
    "skipped: <why>" (no root, no ucx_perftest)."""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(4096)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}")
    if head.startswith("skipped:"):
        return None, head.splitlines()[0]
    _, data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("rtt_8B_us"), dict):
        raise InputError(f"{path}: expected the object of adag-bench-hosts --json "
                         f"(with rtt_8B_us)")
    return data, None


# ---- picking rows ----

def ran(rows, name, **params):
    """The rows named `name` that ran, whose params match (placement too)."""
    out = []
    for r in rows:
        if r["name"] != name or r["skipped"] is not None:
            continue
        p = dict(r["params"], placement=r.get("placement"))
        if all(p.get(k) == v for k, v in params.items()):
            out.append(r)
    return out


def skips(rows, names):
    """Why rows of these names did not run here (distinct reasons)."""
    seen = []
    for r in rows:
        if r["name"] in names and r["skipped"] is not None and r["skipped"] not in seen:
            seen.append(r["skipped"])
    return seen


def by_x(rows, x, y):
    """Sorted (x, y) points of rows, y None skipped; one point per x (the
    first row's: rows of several runs are not averaged)."""
    pts = {}
    for r in rows:
        xv, yv = x(r), y(r)
        if yv is not None and yv > 0 and xv not in pts:
            pts[xv] = yv
    return sorted(pts.items())


def plot_series(ax, pts, label, style):
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **style)
    return bool(pts)


def absent(ax, label):
    """A legend entry for a series this input does not have."""
    ax.plot([], [], label=label, color="#cccccc", linestyle="none", marker="")


def size_text(b):
    if b >= MIB and b % MIB == 0:
        return f"{b // MIB} MiB"
    if b >= KIB and b % KIB == 0:
        return f"{b // KIB} KiB"
    return f"{b} B"


def size_axis(ax, sizes):
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(sizes)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([size_text(s) for s in sorted(sizes)], rotation=30, ha="right")


def bus_gbps(n, nbytes, us):
    """nccl-tests' bus bandwidth (bench/collective.c allreduce_bus_gbps)."""
    return nbytes / (us * 1e3) * 2.0 * (n - 1) / n if us and us > 0 and n > 1 else None


def ray_of(r, key):
    ray = r.get("ray")
    return ray.get(key) if isinstance(ray, dict) else None


# ---- the figure around a plot ----

class Page:
    def __init__(self, out, footnote):
        self.out = out
        self.footnote = footnote

    def new(self, title):
        fig, ax = plt.subplots(figsize=(9.5, 4.8))
        ax.set_title(title)
        return fig, ax

    def no_data(self, ax, command, why):
        text = f"no data: run `{command}`"
        if why:
            text += "\n" + "\n".join(f"rows skipped here: {w}" for w in why[:3])
        ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center",
                wrap=True, fontsize=10,
                bbox=dict(boxstyle="round", facecolor="#fff3cd", edgecolor="#d4a017"))

    def save(self, fig, ax, name, notes=()):
        if ax.get_legend_handles_labels()[0]:
            # beside the axes: never over a point
            handles, labels = ax.get_legend_handles_labels()
            ax.legend(handles, [textwrap.fill(t, 40) for t in labels], fontsize=7.5,
                      loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
        foot = "\n".join(list(notes) + [self.footnote])
        fig.text(0.01, 0.01, foot, fontsize=6.5, color="#555555", va="bottom")
        fig.tight_layout(rect=(0, 0.01 + 0.023 * (foot.count("\n") + 1), 1, 1))
        path = os.path.join(self.out, name)
        fig.savefig(path, format="svg", metadata={"Date": None})
        plt.close(fig)
        return path


# ---- the four plots ----

def plot_latency(page, rows, hosts, hosts_why):
    fig, ax = page.new("Round trip by payload size: driver -> 1 actor -> driver")
    pay = ran(rows, "payload", placement="process")
    zc = ran(rows, "payload-zc", placement="process")
    sizes = set()
    adag = by_x(pay, lambda r: r["params"]["bytes"], lambda r: r["median_us"])
    if plot_series(ax, adag, "adag, process actor", ADAG):
        sizes.update(x for x, _ in adag)
        zpts = by_x(zc, lambda r: r["params"]["bytes"], lambda r: r["median_us"])
        plot_series(ax, zpts, "adag, zero-copy inputs (reserve/commit)", ADAG_ZC)
        sizes.update(x for x, _ in zpts)
        ping = by_x([r for r in pay if r.get("metric") == "latency"],
                    lambda r: r["params"]["bytes"], lambda r: r.get("baseline_value"))
        plot_series(ax, ping, "raw shm ping-pong, 2 processes (spin)", BASE)
        # a bandwidth row's baseline is memcpy's GB/s: its time for the bytes
        mc = by_x([r for r in pay if r.get("metric") == "bandwidth"],
                  lambda r: r["params"]["bytes"],
                  lambda r: r["params"]["bytes"] / (r["baseline_value"] * 1e3)
                  if r.get("baseline_value") else None)
        plot_series(ax, mc, "memcpy of the same bytes (time)", BASE2)
        ray = by_x(pay, lambda r: r["params"]["bytes"], lambda r: ray_of(r, "median_us"))
        if not plot_series(ax, ray, "Ray Compiled Graphs", PEER):
            absent(ax, "Ray Compiled Graphs: not in this run (adag-bench --vs-ray, Ray installed)")
        sizes.update(x for x, _ in ray)
    if hosts:
        rtt = hosts["rtt_8B_us"]
        plot_series(ax, [(8, rtt.get("adag"))] if rtt.get("adag") else [],
                    "adag across 2 hosts (netns, UCX over TCP)", HOSTS)
        plot_series(ax, [(8, rtt.get("ucx_perftest"))] if rtt.get("ucx_perftest") else [],
                    "ucx_perftest, same link (2 x half round trip)", HOSTS_PEER)
        sizes.add(8)
    elif hosts_why:
        absent(ax, f"across 2 hosts: {hosts_why}")
    notes = []
    if adag:
        size_axis(ax, sizes)
        ax.set_yscale("log")
        ax.set_xlabel("payload")
        ax.set_ylabel("median round trip (µs, log)")
        notes.append("Baselines measured in the same run; memcpy's time = the bytes / "
                     "its GB/s.")
    else:
        ax.set_axis_off()
        page.no_data(ax, "adag-bench --json --only payload", skips(rows, {"payload"}))
    return page.save(fig, ax, "latency.svg", notes)


def plot_chain(page, rows, hosts):
    fig, ax = page.new("Latency by pipeline stages (8 B, one execution in flight)")

    def stages(place):
        rs = [r for r in ran(rows, "roundtrip", placement=place, spin_ns=-1)]
        rs += [r for r in ran(rows, "chain", placement=place, inflight=1)
               if r.get("metric") == "latency"]
        return rs

    proc, thr = stages("process"), stages("thread")
    n = lambda r: r["params"]["n"]  # noqa: E731
    pp = by_x(proc, n, lambda r: r["median_us"])
    tp = by_x(thr, n, lambda r: r["median_us"])
    have = plot_series(ax, pp, "adag, process actors", ADAG)
    have |= plot_series(ax, tp, "adag, thread actors", ADAG_THREAD)
    xs = {x for x, _ in pp + tp}
    if have:
        relay = by_x(proc + thr, n, lambda r: r.get("baseline_value"))
        plot_series(ax, relay, "raw token relay through n + 1 processes (best wait)", BASE)
        ray = by_x(proc, n, lambda r: ray_of(r, "median_us"))
        if not plot_series(ax, ray, "Ray Compiled Graphs", PEER):
            absent(ax, "Ray Compiled Graphs: not in this run (adag-bench --vs-ray, Ray installed)")
        xs.update(x for x, _ in ray)
    rate = (hosts or {}).get("chain4_2hosts_execs_per_s", {}).get("inflight1")
    if have and rate:
        plot_series(ax, [(4, 1e6 / rate)],
                    "adag, 4 stages across 2 hosts (1 / executions per s)", HOSTS)
        xs.add(4)
    notes = []
    if have:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(sorted(xs)))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([str(x) for x in sorted(xs)])
        ax.set_yscale("log")
        ax.set_xlabel("stages (actors in the chain; 1 = roundtrip)")
        ax.set_ylabel("median latency (µs, log)")
        cpus = os.cpu_count() or 0
        if xs and max(xs) + 1 > cpus:
            notes.append(f"From {cpus} stages on, the loops (stages + driver) outnumber "
                         f"the {cpus} CPUs: the wait policy, not the hand-off, sets the latency.")
        if len(xs) < 3:
            notes.append("More stage counts: adag-bench --json --only chain --n N.")
    else:
        ax.set_axis_off()
        page.no_data(ax, "adag-bench --json --only chain --n N",
                     skips(rows, {"chain", "roundtrip"}))
    return page.save(fig, ax, "chain.svg", notes)


def plot_allreduce(page, rows):
    fig, ax = page.new("Allreduce bus bandwidth by size (SUM, 4 ranks)")
    host = ran(rows, "allreduce")
    size = lambda r: r["params"]["bytes"]  # noqa: E731
    adag = by_x(host, size, lambda r: r.get("gbps"))
    have = plot_series(ax, adag, "adag host communicator, 4 procs on emu:0..3 (f32)", ADAG)
    sizes = {x for x, _ in adag}
    if have:
        mpi = by_x(host, size, lambda r: r.get("baseline_gbps"))
        if not plot_series(ax, mpi, "Open MPI MPI_Allreduce, 4 procs (vader)", PEER):
            absent(ax, "Open MPI: not in this run (needs mpicc, mpirun)")
    else:
        absent(ax, "host communicator, Open MPI: not in this run "
                   "(adag-bench --only allreduce; needs mpicc, mpirun)")
    for name, label, style, base_label in (
            ("allreduce-dag", "adag inside a compiled DAG (i32)", ADAG_DAG, None),
            ("allreduce-nccl-dag", "adag inside a DAG on CUDA (NCCL)", dict(ADAG_DAG, color="#2ca02c"),
             "NCCL called directly")):
        rs = ran(rows, name)
        pts = by_x(rs, size, lambda r: bus_gbps(r["params"]["n"], size(r), r["median_us"]))
        if plot_series(ax, pts, label, style):
            have = True
            sizes.update(x for x, _ in pts)
            if base_label:
                plot_series(ax, by_x(rs, size, lambda r: bus_gbps(
                    r["params"]["n"], size(r), r.get("baseline_value"))), base_label,
                    dict(BASE, color="#2ca02c"))
    notes = []
    if have:
        size_axis(ax, sizes)
        ax.set_yscale("log")
        ax.set_xlabel("bytes per rank")
        ax.set_ylabel("bus bandwidth (GB/s, log)")
        notes.append("Bus bandwidth as nccl-tests: bytes / time x 2(n-1)/n; "
                     "time per call = the slowest rank's.")
    else:
        ax.set_axis_off()
        page.no_data(ax, "adag-bench --json --only allreduce",
                     skips(rows, {"allreduce", "allreduce-dag"}))
    return page.save(fig, ax, "allreduce.svg", notes)


def plot_loader(page, rows):
    fig, ax = page.new("Data loader: images decoded + augmented per second")
    img = ran(rows, "data-images", n=1)
    torch = ran(rows, "data-images", n=2)
    bars = []  # (label, samples/s or None: not in this run, why; colour)
    if img:
        r = img[0]
        bars.append(("adag data stage", r["per_s"], ADAG["color"]))
        if r.get("baseline_value"):
            bars.append(("ideal: 1 thread's rate\nx the source's threads", r["baseline_value"],
                         BASE["color"]))
        if ray_of(r, "per_s"):
            bars.append(("Ray Data", ray_of(r, "per_s"), PEER["color"]))
        else:
            bars.append(("Ray Data", None, "not in this run (needs Ray: pip install ray)"))
    if torch and torch[0].get("baseline_value"):
        if not img:
            bars.append(("adag data stage", torch[0]["per_s"], ADAG["color"]))
        bars.append(("torch DataLoader\n+ PIL", torch[0]["baseline_value"], "#ff7f0e"))
    elif img:
        why = skips(rows, {"data-images"})
        bars.append(("torch DataLoader\n+ PIL", None,
                     "not in this run" + (f" ({why[0]})" if why else "")))
    notes = []
    if bars:
        ys = range(len(bars))
        ax.barh(list(ys), [b[1] or 0 for b in bars],
                color=[b[2] if b[1] else "none" for b in bars], height=0.6)
        ax.set_ylim(len(bars) - 0.5, -0.5)
        ax.set_yticks(list(ys))
        ax.set_yticklabels([b[0] for b in bars])
        top = max(b[1] or 0 for b in bars)
        for y, b in zip(ys, bars):
            ax.text((b[1] or 0) + top * 0.01, y, f"{b[1]:,.0f}/s" if b[1] else b[2],
                    va="center", fontsize=8, color="black" if b[1] else "#888888")
        ax.set_xlim(0, top * 1.18)
        ax.set_xlabel("samples per second (higher is better)")
        ax.grid(axis="y", visible=False)
        notes.append("WebDataset JPEGs 256 -> random-resized crop 224, flip, normalize, "
                     "f32, batches of 64; every source in the same run.")
        if img and img[0].get("ratio"):
            notes.append(f"adag / ideal: {img[0]['ratio']:.2f}x"
                         + (f"; adag / Ray Data: {img[0]['vs_ray']:.2f}x"
                            if img[0].get("vs_ray") else ""))
    else:
        ax.set_axis_off()
        page.no_data(ax, "adag-bench --json --only data-images", skips(rows, {"data-images"}))
    return page.save(fig, ax, "loader.svg", notes)


# ---- main ----

def machine_text():
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = ", " + " ".join(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    return f"{platform.node() or 'unknown host'}, {os.cpu_count()} CPUs{cpu}"


def main(argv):
    p = argparse.ArgumentParser(prog="bench/plot.py",
                                description="SVG plots of adag-bench --json")
    p.add_argument("bench", nargs="+", help="adag-bench --json output(s); rows taken together")
    p.add_argument("--hosts", help="adag-bench-hosts --json output")
    p.add_argument("--out", default="docs/perf", help="output folder (default docs/perf)")
    p.add_argument("--machine", help="the machine the data is from (default: this host)")
    p.add_argument("--date", help="the date of the data (default: the first input's mtime)")
    a = p.parse_args(argv)
    try:
        rows = []
        for path in a.bench:
            rows += load_rows(path)
        hosts, hosts_why = load_hosts(a.hosts) if a.hosts else (None, None)
    except InputError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 1
    date = a.date or datetime.datetime.fromtimestamp(
        os.stat(a.bench[0]).st_mtime, datetime.timezone.utc).strftime("%Y-%m-%d")
    inputs = ", ".join(os.path.basename(x) for x in a.bench + ([a.hosts] if a.hosts else []))
    foot = f"{a.machine or machine_text()}; data of {date} ({inputs})"
    os.makedirs(a.out, exist_ok=True)
    page = Page(a.out, foot)
    written = [plot_latency(page, rows, hosts, hosts_why), plot_chain(page, rows, hosts),
               plot_allreduce(page, rows), plot_loader(page, rows)]
    for w in written:
        print(f"plot.py: wrote {w}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
