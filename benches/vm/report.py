#!/usr/bin/env python3
"""Tabulate and plot one run of the VM benchmark (scripts/bench.sh).

    report.py RESULTS-DIR

Reads RESULTS-DIR/bench/ (meta.txt, devices.txt, runs.txt, fio/<device>/
<job>-r<rep>.json and .proc) and writes into RESULTS-DIR: results.md (the
tables: median and min-max spread per device and job, ratios to brd and to
NBD from the same boot, the issue's targets, the cost counters; then the
other suites' tables from report_suites.py: baseline, in-flight scaling,
file and NBD backends, zoned; then the deep suite's from report_deep.py,
also alone in deep.md), summary.json, plot data (plot/*.dat) and
plots.gp, the gnuplot script that draws throughput.png and sweep.png.
Standard library only.
"""

import json
import os
import statistics
import sys

import report_deep
import report_suites
from report_util import fmt, ublk_peer

USER_HZ = 100  # /proc/stat and /proc/PID/task/*/stat ticks

JOBS = [
    # job, title, metric key, unit, higher is better
    ("seqread", "Sequential read 256 KiB, 4 jobs", "bw", "MiB/s", True),
    ("seqwrite", "Sequential write 256 KiB, 4 jobs", "bw", "MiB/s", True),
    ("randread", "Random read 4 KiB, 4 jobs", "kiops", "kIOPS", True),
    ("randwrite", "Random write 4 KiB, 4 jobs", "kiops", "kIOPS", True),
    ("lat", "QD1 random read 4 KiB: mean latency", "lat_mean", "µs", False),
    ("lat", "QD1 random read 4 KiB: p99 latency", "lat_p99", "µs", False),
    ("lat1cpu", "QD1 random read 4 KiB, all on vCPU 0: mean latency", "lat_mean", "µs", False),
    ("laturing", "QD1 random read 4 KiB, io_uring (interrupt-style): mean latency", "lat_mean", "µs", False),
    ("lathipri", "QD1 random read 4 KiB, io_uring --hipri (polled): mean latency", "lat_mean", "µs", False),
]


def read_kv(path):
    out = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition(" ")
            out[key] = value
    return out


def parse_counters(line):
    return {k: int(v) for k, v in (w.split("=") for w in line.split())}


def fio_metrics(path):
    with open(path) as f:
        text = f.read()
    # fio may print notes before the JSON object
    data = json.loads(text[text.index("{"):])
    job = data["jobs"][0]
    rd, wr = job["read"], job["write"]
    m = {
        "bw": (rd["bw_bytes"] + wr["bw_bytes"]) / 2**20,
        "kiops": (rd["iops"] + wr["iops"]) / 1000,
        "ios": rd["total_ios"] + wr["total_ios"],
        "fio_ctx": job.get("ctx", 0),
        "fio_usr": job.get("usr_cpu", 0.0),
        "fio_sys": job.get("sys_cpu", 0.0),
    }
    side = rd if rd["total_ios"] else wr
    m["lat_mean"] = side["lat_ns"]["mean"] / 1000
    m["clat_mean"] = side["clat_ns"]["mean"] / 1000
    pct = side["lat_ns"].get("percentile") or side["clat_ns"].get("percentile") or {}
    for p in ("50", "99"):
        if f"{p}.000000" in pct:
            m[f"lat_p{p}"] = pct[f"{p}.000000"] / 1000
    return m


def proc_metrics(path, fio_ios):
    """Per-I/O costs over the whole fio run (ramp included), from counters.
    Disks without I/O accounting (brd is bio-based) use `fio_ios`, fio's
    count scaled to the ramp time too: an estimate."""
    before = after = None
    with open(path) as f:
        for line in f:
            key, _, rest = line.partition(" ")
            if key == "before":
                before = parse_counters(rest)
            elif key == "after":
                after = parse_counters(rest)
    if not before or not after:
        return {}
    d = {k: after[k] - before[k] for k in after if k in before}
    ios = d.get("rd_ios", 0) + d.get("wr_ios", 0)
    if ios <= 0:
        ios = fio_ios
    if ios <= 0:
        return {}
    ticks_us = 1e6 / USER_HZ
    m = {
        "sys_ctx_per_io": d["ctxt"] / ios,
        "cpu_us_per_io": (d["user"] + d["sys"]) * ticks_us / ios,
        "sys_cpu_us_per_io": d["sys"] * ticks_us / ios,
    }
    # (a device without a daemon has none of its counters)
    if d.get("d_vol", 0) + d.get("d_inv", 0) + d.get("d_ticks", 0) > 0:
        m["daemon_ctx_per_io"] = (d["d_vol"] + d["d_inv"]) / ios
        m["daemon_cpu_us_per_io"] = d["d_ticks"] * ticks_us / ios
        if "d_sticks" in d:
            m["daemon_sys_us_per_io"] = d["d_sticks"] * ticks_us / ios
    # (none with BIUS_IOC_COMPLETE_FETCH, which /proc/PID/io does not count)
    if d.get("d_syscr", 0) > 0:
        m["req_per_read"] = ios / d["d_syscr"]
        m["req_per_write"] = ios / max(d["d_syscw"], 1)
    return m


def stats(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


class Results:
    """One run's figures: medians and spreads per device, job and metric."""

    def __init__(self, res, meta, devices, runs):
        self.meta, self.devices, self.runs = meta, devices, runs
        self.build = {}
        path = os.path.join(res, "build.txt")
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    key, _, rest = line.strip().partition(" ")
                    self.build[key] = rest

    def stat(self, dev, job, key):
        return stats([m.get(key) for m in self.runs.get((dev, job), [])])

    def med(self, dev, job, key):
        s = self.stat(dev, job, key)
        return s["median"] if s else None

    def suite(self, name):
        """The devices of a suite (runs before suites existed: all classic)."""
        key = f"suite_{name}"
        if key not in self.meta:
            return list(self.devices) if name == "classic" else []
        return self.meta[key].split()


def main():
    res = sys.argv[1]
    bench = os.path.join(res, "bench")
    meta = read_kv(os.path.join(bench, "meta.txt"))
    devices = []
    with open(os.path.join(bench, "devices.txt")) as f:
        for line in f:
            if line.strip():
                devices.append(line.split()[0])
    runs = {}  # (device, job) -> [metrics per rep]
    with open(os.path.join(bench, "runs.txt")) as f:
        for line in f:
            rep, job, dev, stem = line.split()
            base = os.path.join(bench, "fio", stem)
            try:
                m = fio_metrics(base + ".json")
            except (OSError, ValueError, KeyError) as err:
                print(f"report: skipping {stem}: {err}", file=sys.stderr)
                continue
            if os.path.exists(base + ".proc"):
                runtime, ramp = float(meta.get("runtime", 1)), float(meta.get("ramp", 0))
                m.update(proc_metrics(base + ".proc", m["ios"] * (runtime + ramp) / runtime))
            runs.setdefault((dev, job), []).append(m)

    r = Results(res, meta, devices, runs)
    stat, med = r.stat, r.med
    classic = r.suite("classic")

    summary = {"meta": meta, "devices": devices, "results": {}}
    for (dev, job), ms in runs.items():
        keys = sorted({k for m in ms for k in m})
        summary["results"].setdefault(dev, {})[job] = {k: stat(dev, job, k) for k in keys}

    host_load = ""
    for name in ("host-load-before.txt", "host-load-after.txt"):
        p = os.path.join(res, name)
        if os.path.exists(p):
            with open(p) as f:
                host_load += f"{name.split('-')[-1][:-4]}: `{f.read().strip()}`; "

    modes = meta.get("modes", "copy").split()
    bius_ram = [d for d in classic if d.startswith("bius-ram-") and "@" not in d]
    lines = []
    w = lines.append
    w("# BIUS VM benchmark")
    w("")
    w(
        f"One boot of the test VM (QEMU TCG, {meta.get('cpus')} vCPUs, kernel {meta.get('kernel')}, "
        f"{meta.get('fio')}), fio `psync`, `direct=1`, {meta.get('reps')} repetitions of "
        f"{meta.get('runtime')} s (+{meta.get('ramp')} s ramp) per device and job, devices of "
        f"{meta.get('size_mb')} MiB prefilled, BIUS with {meta.get('bius_queues')} queues; "
        f"transfer modes: {' '.join(modes)}"
        + ("" if meta.get("transfer_flag") == "1" else " (biusctl has no --transfer yet)")
        + f"; BIUS daemons with `--poll-us {meta.get('poll_us', '0')}`"
        + f"; user-space servers (BIUS, nbdkit, ublk) with GLIBC_TUNABLES `{meta.get('glibc_tunables', 'none')}`"
        + ". Figures: median, then the spread (min–max) of the repetitions; "
        "ratios are medians over the median of brd / NBD / ublk in the same boot "
        "(× ublk: against the ublk device doing the same work: BIUS null, which moves no data, against "
        "rublk's null target in user-copy mode (ublk-null-nodata), BIUS zero, whose data moves, against "
        "its null target (ublk-null), any other against the ublk RAM server) "
        "(for latency: the reference's latency over the device's, so > 1 is better too)."
        + f" Suites run: {meta.get('suites', 'classic')}."
    )
    w("")
    build = os.path.join(res, "build.txt")
    if os.path.exists(build):
        with open(build) as f:
            w("Built from: " + "; ".join(f"`{line.strip()}`" for line in f if line.strip()) + ".")
            w("")
    w(
        "Under TCG every figure is far below native and single runs vary up to 2×: "
        "compare devices within this table only. Host load (2 cores, shared): " + host_load
    )
    w("")
    for job, title, key, unit, higher in JOBS:
        if not any((d, job) in runs for d in devices):
            continue
        w(f"## {title} ({unit})")
        w("")
        w(f"| device | median {unit} | spread | × brd | × NBD | × ublk |")
        w("|---|---:|---:|---:|---:|---:|")
        ref_brd, ref_nbd = med("brd", job, key), med("nbd", job, key)
        for d in devices:
            s = stat(d, job, key)
            if not s:
                continue

            def ratio(ref):
                if not ref or not s["median"]:
                    return "–"
                r = s["median"] / ref if higher else ref / s["median"]
                return f"{r:.2f}"

            w(
                f"| {d} | {fmt(s['median'])} | {fmt(s['min'])}–{fmt(s['max'])} "
                f"| {ratio(ref_brd)} | {ratio(ref_nbd)} | {ratio(med(ublk_peer(d), job, key))} |"
            )
        w("")

    # block-size sweep
    sweep = meta.get("sweep", "").split()
    sweep_devs = [d for d in meta.get("sweep_devices", "").split() if d]
    if sweep and sweep_devs:
        w("## Block-size sweep: sequential read, 4 jobs (MiB/s, median [min–max])")
        w("")
        w("| block size | " + " | ".join(sweep_devs) + " |")
        w("|---|" + "---:|" * len(sweep_devs))
        for bs in sweep:
            cells = []
            for d in sweep_devs:
                s = stat(d, f"sweep-{bs}", "bw")
                cells.append(f"{fmt(s['median'])} [{fmt(s['min'])}–{fmt(s['max'])}]" if s else "–")
            w(f"| {bs} | " + " | ".join(cells) + " |")
        w("")

    # targets of the issue
    if bius_ram:
        targets(w, devices, bius_ram, sweep, stat, med)

    suite_lines, suite_summary = report_suites.tables(r, JOBS, sweep if sweep_devs else [])
    lines += suite_lines
    summary.update(suite_summary)
    deep_lines, deep_summary = report_deep.tables(r)
    lines += deep_lines
    if deep_summary:
        summary["deep"] = deep_summary
        with open(os.path.join(res, "deep.md"), "w") as f:
            f.write("\n".join(report_deep.header(r) + deep_lines))

    cost_table(w, devices, runs, med)
    memprobe_table(w, res)
    if classic:
        w("![throughput](throughput.png)")
        w("")
    if sweep and sweep_devs:
        w("![block-size sweep](sweep.png)")
        w("")

    with open(os.path.join(res, "results.md"), "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(res, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    plots(res, meta, devices, stat, sweep, sweep_devs)


def targets(w, devices, bius_ram, sweep, stat, med):
    """The issue's targets, from the classic suite."""
    w("## Targets")
    w("")
    w("| target | measured (medians) | met? |")
    w("|---|---|---|")

    def verdict(ok):
        return "n/a" if ok is None else ("yes" if ok else "**no**")

    for d in bius_ram + (["bius-null"] if "bius-null" in devices else []):
        for job in ("randread", "randwrite"):
            v, n = med(d, job, "kiops"), med("nbd", job, "kiops")
            ok = None if v is None or not n else v / n >= 3.5
            meas = f"{fmt(v)} k vs NBD {fmt(n)} k = {v / n:.2f}×" if v and n else "–"
            w(f"| {d} 4 KiB {job} ≥ 3.5× NBD | {meas} | {verdict(ok)} |")
    map_devs = [d for d in bius_ram if d != "bius-ram-copy"]
    for d in map_devs or ["bius-ram-copy"]:
        note = "" if map_devs else " (no mapping mode yet: copy shown)"
        for job in ("seqread", "seqwrite"):
            v, b, n = med(d, job, "bw"), med("brd", job, "bw"), med("nbd", job, "bw")
            ok = None
            if v and b and n and map_devs:
                ok = v / b >= 0.30 and v / n >= 8
            meas = (
                f"{fmt(v)} MiB/s = {v / b:.2f}× brd, {v / n:.2f}× NBD" if v and b and n else "–"
            )
            w(f"| {d} 256 KiB {job} ≥ 30% brd and ≥ 8× NBD{note} | {meas} | {verdict(ok)} |")
    for d in bius_ram + (["bius-null"] if "bius-null" in devices else []):
        v = med(d, "lat", "lat_mean")
        w(
            f"| {d} QD1 4 KiB random read mean < 80 µs | {fmt(v)} µs (p99 {fmt(med(d, 'lat', 'lat_p99'))} µs) "
            f"| {verdict(None if v is None else v < 80)} |"
        )
    if "bius-ram-map" in devices and "bius-ram-copy" in devices:
        big = [bs for bs in sweep if parse_size(bs) >= 256 << 10]
        cells, ok = [], True
        for bs in big:
            m, c = med("bius-ram-map", f"sweep-{bs}", "bw"), med("bius-ram-copy", f"sweep-{bs}", "bw")
            if m is None or c is None:
                continue
            cells.append(f"{bs}: {m / c:.2f}×")
            ok = ok and m > c
        w(f"| map beats copy at ≥ 256 KiB | map/copy {', '.join(cells)} | {verdict(ok if cells else None)} |")
    else:
        w("| map beats copy at ≥ 256 KiB | no map mode in this build | n/a |")
    if "bius-ram-selective" in devices:
        cells, ok = [], True
        for bs in sweep:
            best = None
            for other in ("bius-ram-copy", "bius-ram-map"):
                s = stat(other, f"sweep-{bs}", "bw")
                if s and (best is None or s["median"] > best["median"]):
                    best = s
            sel = stat("bius-ram-selective", f"sweep-{bs}", "bw")
            if not best or not sel:
                continue
            # within noise: selective's spread reaches the better one's
            within = sel["max"] >= best["min"]
            ok = ok and within
            cells.append(f"{bs}: {sel['median'] / best['median']:.2f}×")
        w(
            "| selective within noise of the better of copy/map at every size "
            f"| selective/best {', '.join(cells)} | {verdict(ok if cells else None)} |"
        )
    else:
        w("| selective within noise of the better mode | no selective mode in this build | n/a |")
    w("")


def cost_table(w, devices, runs, med):
    """Where the time goes: counters per I/O."""
    w("## Cost per I/O (medians over the repetitions; whole fio run incl. ramp)")
    w("")
    w(
        "From counters read before and after each run: completed I/Os from "
        "`/sys/block/X/stat`, system-wide context switches and CPU time from "
        "`/proc/stat` (10 ms ticks), the daemon's (biusctl, nbdkit) threads' "
        "context switches and CPU time, and its read()/write() calls "
        "(`/proc/PID/io`). fio ctx is fio's own count of its threads' switches."
    )
    w("")
    w(
        "| device | job | CPU µs/I/O (all) | sys CPU µs/I/O | ctx switches/I/O (system) "
        "| fio ctx/I/O | daemon ctx/I/O | daemon CPU µs/I/O | of which in the kernel | requests per daemon read() "
        "| completions per write() |"
    )
    w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    jobs = ("randread", "randwrite", "seqread", "seqwrite", "lat", "lat1cpu", "laturing", "lathipri")
    for job in jobs + report_suites.AIO_JOBS + tuple(j for j, *_ in report_suites.ZONED_JOBS):
        for d in devices:
            if (d, job) not in runs:
                continue
            ios = med(d, job, "ios")
            fio_ctx = med(d, job, "fio_ctx")
            w(
                f"| {d} | {job} | {fmt(med(d, job, 'cpu_us_per_io'))} | {fmt(med(d, job, 'sys_cpu_us_per_io'))} "
                f"| {fmt(med(d, job, 'sys_ctx_per_io'))} "
                f"| {fmt(fio_ctx / ios if fio_ctx is not None and ios else None)} "
                f"| {fmt(med(d, job, 'daemon_ctx_per_io'))} | {fmt(med(d, job, 'daemon_cpu_us_per_io'))} "
                f"| {fmt(med(d, job, 'daemon_sys_us_per_io'))} "
                f"| {fmt(med(d, job, 'req_per_read'))} | {fmt(med(d, job, 'req_per_write'))} |"
            )
    w("")


def memprobe_table(w, res):
    """Copy speed by method, measured in the VM."""
    probe = os.path.join(res, "bench", "memprobe.txt")
    if os.path.exists(probe):
        w("## Memory copy and fill speed in this VM (MB/s, benches/vm/tools/memprobe.c)")
        w("")
        w(
            "What one vCPU copies (or fills with zeroes) per second in user space, by method: "
            "under TCG `rep movsb` and `rep stosb` run a byte at a time, and glibc's memcpy and "
            "memset pick them above a few KiB unless GLIBC_TUNABLES says otherwise "
            "(`-tuned`: the setting the servers above ran with). The kernel's "
            "copy_to/from_user uses `rep movsb` too."
        )
        w("")
        speeds, sizes = {}, []
        with open(probe) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4 and parts[0] == "memprobe":
                    speeds[(parts[1], parts[2])] = parts[3]
                    if parts[2] not in sizes:
                        sizes.append(parts[2])
        methods = list(dict.fromkeys(m for m, _ in speeds))
        w("| method | " + " | ".join(f"{int(s) >> 10} KiB" for s in sizes) + " |")
        w("|---|" + "---:|" * len(sizes))
        for m in methods:
            w(f"| {m} | " + " | ".join(speeds.get((m, s), "–") for s in sizes) + " |")
        w("")


def plots(res, meta, devices, stat, sweep, sweep_devs):
    """Plot data and the gnuplot script."""
    pdir = os.path.join(res, "plot")
    os.makedirs(pdir, exist_ok=True)
    panels = []
    for job, title, key, unit, _ in JOBS:
        rows = []
        for i, d in enumerate(devices):
            s = stat(d, job, key)
            if s:
                rows.append(f"{i} {d} {s['median']:.3f} {s['min']:.3f} {s['max']:.3f}")
        if rows:
            name = f"{job}-{key}"
            with open(os.path.join(pdir, name + ".dat"), "w") as f:
                f.write("\n".join(rows) + "\n")
            panels.append((name, title, unit))
    n_cols = 3 if len(panels) <= 6 else 4
    n_rows = max(1, -(-len(panels) // n_cols))
    gp = [
        f"set terminal pngcairo size {n_cols * 460},{n_rows * 440 + 40} font 'sans,10' noenhanced",
        "set output 'throughput.png'",
        f"set multiplot layout {n_rows},{n_cols} title 'BIUS VM benchmark (TCG, log scales; medians, bars: min–max of {meta.get('reps')} runs)'",
        "set style fill solid 0.6 border -1",
        "set boxwidth 0.6",
        "set xtics rotate by -30 left",
        "set logscale y",
        "set grid ytics mytics",
        "unset key",
    ]
    for name, title, unit in panels:
        gp += [
            f"set title \"{title}\"",
            f"set ylabel '{unit}'",
            f"set yrange [{ymin(pdir, name)}:*]",
            f"plot 'plot/{name}.dat' using 1:3:xticlabels(2) with boxes lc rgb '#4682b4', "
            f"'' using 1:3:4:5 with yerrorbars lc rgb 'black' pt -1, "
            f"'' using 1:3:($3 >= 100 ? sprintf('%.0f', $3) : sprintf('%.3g', $3)) with labels offset 0,0.7",
        ]
    gp.append("unset multiplot")
    if sweep and sweep_devs:
        for d in sweep_devs:
            rows = []
            for bs in sweep:
                s = stat(d, f"sweep-{bs}", "bw")
                if s:
                    rows.append(f"{parse_size(bs) // 1024} {s['median']:.3f} {s['min']:.3f} {s['max']:.3f}")
            with open(os.path.join(pdir, f"sweep-{d}.dat"), "w") as f:
                f.write("\n".join(rows) + "\n")
        gp += [
            "reset",
            "set terminal pngcairo size 1000,650 font 'sans,11' noenhanced",
            "set output 'sweep.png'",
            "set title 'Sequential read, 4 jobs psync direct: block-size sweep (median, bars min–max)'",
            "set logscale x 2",
            "set xlabel 'block size (KiB)'",
            "set ylabel 'MiB/s (log)'",
            "set logscale y",
            "set grid",
            "set key top left",
            "plot "
            + ", ".join(
                f"'plot/sweep-{d}.dat' using 1:2:3:4 with yerrorlines lw 2 title '{d}'" for d in sweep_devs
            ),
        ]
    with open(os.path.join(res, "plots.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")


def ymin(pdir, name):
    """A log axis' floor: below the smallest minimum of the panel."""
    with open(os.path.join(pdir, name + ".dat")) as f:
        low = min(float(line.split()[3]) for line in f if line.strip())
    return f"{low / 3:.4g}"


def parse_size(text):
    text = text.lower()
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    if text[-1] in mult:
        return int(text[:-1]) * mult[text[-1]]
    return int(text)


if __name__ == "__main__":
    main()
