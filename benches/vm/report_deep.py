"""Tables of the VM benchmark's deep suite (report.py imports this): io_uring
at queue depth 32 and 128 with 2 jobs, QD1 latency with io_uring and psync,
the CPU time every I/O costs on all CPUs together and the part of it spent
in the device's daemon, and the targets against ublk.

CPU per I/O is (user + system + irq + softirq time of all CPUs, from
/proc/stat) over the I/Os the disk completed, the whole fio run with its
ramp: the yardstick's "all CPUs' busy time over I/Os done".  The added CPU
of a device is its CPU per I/O less the floor's in the same job: null_blk
keeping no data (null_blk-nodata), the kernel alone.
"""

from report_util import cell, fmt, ratio, ublk_peer

# job, title, metric key, unit
DEPTH_JOBS = (
    ("deep-randread-qd32", "4 KiB random read, QD32", "kiops", "kIOPS"),
    ("deep-randread-qd128", "4 KiB random read, QD128", "kiops", "kIOPS"),
    ("deep-randwrite-qd32", "4 KiB random write, QD32", "kiops", "kIOPS"),
    ("deep-randwrite-qd128", "4 KiB random write, QD128", "kiops", "kIOPS"),
    ("deep-read128k-qd32", "128 KiB sequential read, QD32", "bw", "MiB/s"),
    ("deep-write128k-qd32", "128 KiB sequential write, QD32", "bw", "MiB/s"),
)
# the QD1 rows: job, engine
QD1_JOBS = (("deep-lat-qd1", "io_uring"), ("lat", "psync"))
FLOOR = "null_blk-nodata"


def table_head(title, columns, numeric):
    """A table's heading lines: the title, then the columns, the first
    left-aligned, the others right-aligned if `numeric`."""
    align = "---:" if numeric else "---"
    return [title, "", "| " + " | ".join(columns) + " |", "|---|" + f"{align}|" * (len(columns) - 1)]


def cpu_ns(r, dev, job, key="cpu_us_per_io"):
    v = r.med(dev, job, key)
    return v * 1000 if v is not None else None


def added_cpu(r, dev, job):
    """CPU ns per I/O over the floor's in the same job."""
    v, floor = cpu_ns(r, dev, job), cpu_ns(r, FLOOR, job)
    return v - floor if v is not None and floor is not None else None


def added_ratio(add, peer_add):
    """BIUS's added CPU over its ublk peer's; None unless both are above
    the floor (a run under the floor says the floor was noisy, not
    that the device costs nothing)."""
    if add is None or peer_add is None or add <= 0 or peer_add <= 0:
        return None
    return add / peer_add


def header(r):
    """The heading of deep.md, the suite's table alone."""
    m = r.meta
    lines = [
        "# BIUS VM benchmark: deep queues and CPU per I/O",
        "",
        f"One boot of the test VM (QEMU TCG, {m.get('cpus')} vCPUs, kernel {m.get('kernel')}, "
        f"{m.get('fio')}), `direct=1`, {m.get('reps')} repetitions of {m.get('runtime')} s "
        f"(+{m.get('ramp')} s ramp) per device and job, devices of {m.get('size_mb')} MiB prefilled. "
        "BIUS with biusctl's defaults (bius-null and bius-zero: `--queues "
        f"{m.get('bius_queues')} --poll-us {m.get('poll_us', '0')}`, the same), ublk with the same "
        "queues and depth 128. Figures: median [min–max] of the repetitions; × ublk is the median "
        "over the median of the ublk peer doing the same work in the same boot (ublk-null-nodata, "
        "rublk's null target with user copy, for bius-null: no data moves; ublk-null, whose "
        "kernel copies each request's data, for bius-zero; ublk-ram for the others; for latency "
        "the peer's over the device's, so > 1 is better). Under TCG every crossing of the user/kernel boundary costs 20–30× more than "
        "natively: compare within this table only.",
        "",
    ]
    if r.build:
        lines += ["Built from: " + "; ".join(f"`{k} {v}`" for k, v in r.build.items()) + ".", ""]
    return lines


def depth_table(r, devs, job, title, key, unit):
    lines = table_head(
        f"### {title}, io_uring, 2 jobs",
        ["device", unit, "× ublk", "CPU ns/I/O (all CPUs)", "of which the daemon", "added over null_blk",
         "× ublk's added", "p99 µs"],
        True,
    )
    rows = {}
    for d in devs:
        s = r.stat(d, job, key)
        if not s:
            continue
        peer = ublk_peer(d)
        x_ublk = ratio(s["median"], r.med(peer, job, key)) if d.startswith("bius-") else None
        add, peer_add = added_cpu(r, d, job), added_cpu(r, peer, job)
        x_add = added_ratio(add, peer_add) if d.startswith("bius-") else None
        rows[d] = {"median": s["median"], "x_ublk": x_ublk, "cpu_ns": cpu_ns(r, d, job),
                   "daemon_cpu_ns": cpu_ns(r, d, job, "daemon_cpu_us_per_io"),
                   "added_cpu_ns": add, "x_ublk_added_cpu": x_add}
        lines.append(
            f"| {d} | {cell(s)} | {fmt(x_ublk)} | {fmt(rows[d]['cpu_ns'], 0)} "
            f"| {fmt(rows[d]['daemon_cpu_ns'], 0)} | {fmt(add, 0)} | {fmt(x_add)} "
            f"| {fmt(r.med(d, job, 'lat_p99'))} |"
        )
    return lines + [""], rows


def qd1_table(r, devs):
    lines = table_head(
        "### QD1 4 KiB random read: latency (µs)",
        ["device", "io_uring p50", "p99", "mean", "× ublk", "psync p50", "p99", "mean", "× ublk"],
        True,
    )
    rows = {}
    for d in devs:
        cells, row = [], {}
        for job, engine in QD1_JOBS:
            mean = r.med(d, job, "lat_mean")
            x = ratio(r.med(ublk_peer(d), job, "lat_mean"), mean) if d.startswith("bius-") else None
            row[engine] = {"p50": r.med(d, job, "lat_p50"), "p99": r.med(d, job, "lat_p99"),
                           "mean": mean, "x_ublk": x}
            cells += [fmt(row[engine]["p50"]), fmt(row[engine]["p99"]), fmt(mean), fmt(x)]
        if any(v["mean"] is not None for v in row.values()):
            rows[d] = row
            lines.append(f"| {d} | " + " | ".join(cells) + " |")
    return lines + [""], rows


def targets_table(r, devs):
    """The targets for each BIUS device against its ublk peer."""
    lines = table_head(
        "### Targets, BIUS defaults against ublk, same boot",
        ["device", "target", "measured (medians)", "met?"],
        False,
    )
    verdicts = {}

    def verdict(ok):
        return "n/a" if ok is None else ("yes" if ok else "**no**")

    def row(d, name, meas, ok):
        verdicts.setdefault(d, {})[name] = ok
        lines.append(f"| {d} | {name} | {meas} | {verdict(ok)} |")

    for d in (d for d in devs if d.startswith("bius-")):
        peer = ublk_peer(d)
        if peer not in devs:
            row(d, f"against {peer}", f"no {peer} in this boot", None)
            continue
        xs = []
        for job, title, key, _ in DEPTH_JOBS:
            xs.append((title, ratio(r.med(d, job, key), r.med(peer, job, key))))
        for job, engine in QD1_JOBS:
            xs.append((f"QD1 {engine} mean", ratio(r.med(peer, job, "lat_mean"), r.med(d, job, "lat_mean"))))
        known = [(t, x) for t, x in xs if x is not None]
        below = [f"{t} {x:.2f}×" for t, x in known if x < 1.0]
        row(d, "every row ≥ 1.0× ublk",
            f"lowest {min(x for _, x in known):.2f}×" + (f"; below: {', '.join(below)}" if below else "")
            if known else "–", all(x >= 1.0 for _, x in known) if known else None)
        four_k = [(t, x) for t, x in xs[:4] if x is not None]
        row(d, "4 KiB at QD ≥ 32 ≥ 1.5× ublk's IOPS", ", ".join(f"{t} {x:.2f}×" for t, x in four_k) or "–",
            all(x >= 1.5 for _, x in four_k) if four_k else None)
        adds, texts = [], []
        for job, title, *_ in DEPTH_JOBS:
            a, pa = added_cpu(r, d, job), added_cpu(r, peer, job)
            x = added_ratio(a, pa)
            if x is not None:
                adds.append(x)
                texts.append(f"{title}: {a:.0f} vs {pa:.0f} ns = {x:.2f}×")
            elif a is not None and pa is not None:
                texts.append(f"{title}: {a:.0f} vs {pa:.0f} ns, under the floor (not judged)")
        row(d, "added CPU/I/O over null_blk ≤ 0.7× ublk's", "; ".join(texts) or "–",
            all(x <= 0.7 for x in adds) if adds else None)
        qd1 = []
        for job, engine in QD1_JOBS:
            v, p = r.med(d, job, "lat_mean"), r.med(peer, job, "lat_mean")
            if v is not None and p:
                qd1.append((engine, v, p))
        row(d, "QD1 mean ≤ 0.5× ublk's",
            "; ".join(f"{e}: {v:.1f} vs {p:.1f} µs = {v / p:.2f}×" for e, v, p in qd1) or "–",
            all(v / p <= 0.5 for _, v, p in qd1) if qd1 else None)
    return lines + [""], verdicts


def tables(r):
    """The deep suite's tables and summary; nothing if it did not run."""
    devs = r.suite("deep")
    if not devs:
        return [], {}
    lines = [
        "## Deep queues: io_uring at QD 32 and 128, and CPU per I/O",
        "",
        "CPU ns/I/O: all CPUs' busy time (user, system, irq, softirq from `/proc/stat`) over the "
        "I/Os the disk completed, the whole run with its ramp; of which the daemon: its threads' "
        "user and system time; added: over the floor's in the same job (null_blk-nodata: null_blk "
        "keeping no data, the kernel alone).",
        "",
    ]
    summary = {"devices": devs, "jobs": {}}
    for job, title, key, unit in DEPTH_JOBS:
        ls, rows = depth_table(r, devs, job, title, key, unit)
        if rows:
            lines += ls
            summary["jobs"][job] = rows
    ls, summary["qd1"] = qd1_table(r, devs)
    lines += ls
    ls, summary["targets"] = targets_table(r, devs)
    lines += ls
    return lines, summary
