"""Tables of the VM benchmark's suites beyond the classic one (report.py
imports this): in-flight scaling on one queue, the file and NBD backends
against the kernel's loop and nbd drivers, zoned BIUS against zoned
null_blk and ublk's zoned target, the baseline biusctl (devices
<name>@base) against the current one, and devices with their statistics
against the same without (<name>-nostats).

Each function takes a Results (report.py: medians and spreads per device,
job and metric) and returns (markdown lines, summary dict).
"""

from report_util import cell, fmt, ratio

AIO_JOBS = ("randread-qd1", "randread-qd32", "randwrite-qd1", "randwrite-qd32")

# the reference device of a suite: the kernel's own driver for the same thing
SUITE_REF = {"file": "loop-dio", "nbd": "nbd"}
SUITE_TITLE = {
    "file": "File backend: one image on ext4 on brd",
    "nbd": "NBD backend: nbdkit memory",
}


def parse_time_us(text):
    """10ms, 80us, 1s -> microseconds (None if not a time)."""
    for suffix, mult in (("us", 1), ("ms", 1000), ("s", 1_000_000)):
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * mult
            except ValueError:
                return None
    return None


def inflight(r):
    devs = r.suite("inflight")
    if not devs:
        return [], {}
    lat_us = parse_time_us(r.meta.get("inflight_latency", "10ms")) or 10000.0
    lines, summary = [], {}
    w = lines.append
    w("## In-flight scaling: one queue, 4 KiB random read, libaio (IOPS)")
    w("")
    w(
        f"`biusctl create ramdisk --queues 1 --depth 64`, with `--latency read={r.meta.get('inflight_latency', '10ms')}` "
        f"(bius-q1-lat10ms: each read completes no earlier than {fmt(lat_us / 1000)} ms after it arrives, "
        f"from a timer, so up to 64 wait at once) and without (bius-q1-ram); devices of "
        f"{r.meta.get('inflight_size_mb', '?')} MiB, fio 1 job, `iodepth` 1 and 32, "
        f"{r.meta.get('inflight_runtime', '?')} s per run for the 10 ms device "
        f"({r.meta.get('runtime')} s for the others). Ideal QD32/QD1 for a 10 ms device: 32. "
        f"Overhead: QD1 mean completion latency (fio's clat) minus {fmt(lat_us / 1000)} ms; "
        "null_blk-lat10ms (configfs, `irqmode=2 completion_nsec=10ms`, one queue, depth 64) pays "
        "what the guest's own timers and wake-ups cost, so BIUS's share is the last column, "
        "its clat minus null_blk's; the plain ramdisk's QD1 latency is the whole of its request, "
        "for comparison."
    )
    w("")
    ref = "null_blk-lat10ms" if "null_blk-lat10ms" in devs else None
    ref_clat = r.med(ref, "randread-qd1", "clat_mean") if ref else None
    w(
        "| device | IOPS QD1 | IOPS QD32 | QD32/QD1 | I/Os per QD1 run | QD1 mean clat µs | QD1 p99 µs "
        "| overhead µs | over null_blk-lat10ms µs |"
    )
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for d in devs:
        q1 = r.stat(d, "randread-qd1", "kiops")
        q32 = r.stat(d, "randread-qd32", "kiops")
        rat = ratio(r.med(d, "randread-qd32", "kiops"), r.med(d, "randread-qd1", "kiops"))
        clat = r.med(d, "randread-qd1", "clat_mean")
        timed = d.endswith("-lat10ms")
        over = clat - lat_us if clat is not None and timed else None
        over_ref = clat - ref_clat if clat is not None and ref_clat is not None and timed and d != ref else None
        w(
            f"| {d} | {cell(q1, 1000)} | {cell(q32, 1000)} | {fmt(rat)} "
            f"| {fmt(r.med(d, 'randread-qd1', 'ios'), 0)} | {fmt(clat)} "
            f"| {fmt(r.med(d, 'randread-qd1', 'lat_p99'))} | {fmt(over)} | {fmt(over_ref)} |"
        )
        summary[d] = {
            "iops_qd1": q1 and q1["median"] * 1000,
            "iops_qd32": q32 and q32["median"] * 1000,
            "qd32_over_qd1": rat,
            "qd1_clat_us": clat,
            "overhead_us": over,
            "over_null_blk_us": over_ref,
        }
    w("")
    return lines, summary


def backend(r, suite):
    devs = r.suite(suite)
    if not devs:
        return [], {}
    ref = SUITE_REF[suite]
    lines, summary = [], {}
    w = lines.append
    w(f"## {SUITE_TITLE[suite]}: 4 KiB random I/O, libaio, QD1 and QD32")
    w("")
    if suite == "file":
        w(
            f"One image file of {r.meta.get('size_mb')} MiB on ext4 on brd (`/dev/ram1`), prefilled, "
            "served by the loop driver (`losetup --direct-io=on`, loop-dio) and by "
            "`biusctl create file --direct --engine uring|threads|sync` (sync: one request "
            f"at a time per queue, the old path; {r.meta.get('bius_queues')} queues each)."
        )
    else:
        w(
            f"An `nbdkit memory` server of {r.meta.get('size_mb')} MiB each, on a Unix socket: "
            "the kernel's nbd.ko through `nbd-client` (nbd) and `biusctl create nbd unix:SOCK` "
            f"(bius-nbd, {r.meta.get('bius_queues')} queues, 1 connection)."
        )
    w(
        f"fio 1 job, {r.meta.get('runtime')} s per run; kIOPS as median [min–max]; "
        f"µs: mean latency (fio's lat, submission included); × {ref}: kIOPS over {ref}'s."
    )
    w("")
    for rw in ("randread", "randwrite"):
        if not any((d, f"{rw}-qd1") in r.runs for d in devs):
            continue
        w(f"### {rw}")
        w("")
        w(f"| device | kIOPS QD1 | µs QD1 | kIOPS QD32 | µs QD32 | QD32/QD1 | × {ref} QD1 | × {ref} QD32 |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|")
        for d in devs:
            k1, k32 = r.med(d, f"{rw}-qd1", "kiops"), r.med(d, f"{rw}-qd32", "kiops")
            x1 = ratio(k1, r.med(ref, f"{rw}-qd1", "kiops"))
            x32 = ratio(k32, r.med(ref, f"{rw}-qd32", "kiops"))
            w(
                f"| {d} | {cell(r.stat(d, f'{rw}-qd1', 'kiops'))} | {fmt(r.med(d, f'{rw}-qd1', 'lat_mean'))} "
                f"| {cell(r.stat(d, f'{rw}-qd32', 'kiops'))} | {fmt(r.med(d, f'{rw}-qd32', 'lat_mean'))} "
                f"| {fmt(ratio(k32, k1))} | {fmt(x1)} | {fmt(x32)} |"
            )
            summary.setdefault(d, {})[rw] = {
                "kiops_qd1": k1,
                "kiops_qd32": k32,
                "lat_us_qd1": r.med(d, f"{rw}-qd1", "lat_mean"),
                "lat_us_qd32": r.med(d, f"{rw}-qd32", "lat_mean"),
                f"x_{ref}_qd1": x1,
                f"x_{ref}_qd32": x32,
            }
        w("")
    return lines, summary


# the zoned suite's jobs: job, title, metric key, unit
ZONED_JOBS = (
    ("zseqwrite", "128 KiB sequential write", "bw", "MiB/s"),
    ("zrandread", "4 KiB random read", "kiops", "kIOPS"),
)


def zoned(r):
    devs = r.suite("zoned")
    if not devs:
        return [], {}
    lines, summary = [], {}
    w = lines.append
    w("## Zoned: one geometry on zoned null_blk, BIUS and ublk, `--zonemode=zbd`")
    w("")
    zone_mb = r.meta.get("zone_mb", "?")
    size_mb = r.meta.get("size_mb", "?")
    w(
        f"The same zoned geometry on each: {size_mb} MiB in zones of {zone_mb} MiB, no conventional "
        "zones, no open or active limit, 512-byte blocks, prefilled: zoned null_blk through configfs "
        f"(null_blk-zoned, `memory_backed=1`, {r.meta.get('bius_queues')} submit queues of depth 128), "
        f"`biusctl create ramdisk --zoned --zone-size {zone_mb}M` (bius-zoned, "
        f"{r.meta.get('bius_queues')} queues, `--poll-us {r.meta.get('poll_us', '0')}`), rublk's zoned RAM "
        f"target `rublk add zoned --size {size_mb}MiB --zone-size {zone_mb}MiB --conv-zones 0` (ublk-zoned, "
        f"{r.meta.get('bius_queues')} queues of depth 128; ublk zoned moves the data with user copy, "
        "`pread`/`pwrite` on `/dev/ublkcN`); scheduler "
        f"`{r.meta.get('zoned_scheduler', '?')}` on all three. fio `psync`, `direct=1`, "
        "`--zonemode=zbd`, 4 jobs each on its quarter of the disk: 128 KiB sequential writes (fio resets "
        "a full zone before writing it again), then `blkzone finish` of every zone and 4 KiB random "
        f"reads; {r.meta.get('runtime')} s per run. Median [min–max]; × ublk: the median over "
        "ublk-zoned's; × null_blk: over null_blk-zoned's. Zone append is not measured: user space "
        "has no zone append call on a block device (fio's `--zonemode=zbd` writes at the write pointer)."
    )
    note = r.meta.get("zoned_ublk_skipped")
    if note:
        w("")
        w(f"No ublk-zoned on this kernel ({r.meta.get('kernel')}): {note}.")
    w("")
    w("| device | " + " | ".join(f"{t}, {u} | × null_blk | × ublk" for _, t, _, u in ZONED_JOBS) + " |")
    w("|---|" + "---:|---:|---:|" * len(ZONED_JOBS))
    for d in devs:
        cells = []
        for job, _, key, _ in ZONED_JOBS:
            v = r.med(d, job, key)
            xn = ratio(v, r.med("null_blk-zoned", job, key))
            xu = ratio(v, r.med("ublk-zoned", job, key))
            cells += [cell(r.stat(d, job, key)), fmt(xn), fmt(xu)]
            summary.setdefault(d, {})[job] = {key: v, "x_null_blk": xn, "x_ublk": xu}
        w(f"| {d} | " + " | ".join(cells) + " |")
    w("")
    attrs = [(k, v) for k, v in r.meta.items() if k.startswith("zoned_dev:")]
    if attrs:
        w("Queue attributes as the guest read them (`/sys/block/X/queue`):")
        w("")
        for k, v in attrs:
            w(f"- {k.split(':', 1)[1]}: `{v}`")
        w("")
    return lines, summary


def baseline(r, jobs, sweep):
    """jobs: report.py's JOBS (job, title, key, unit, higher is better)."""
    pairs = [(d.split("@")[0], d) for d in r.devices if d.endswith("@base")]
    build = r.build.get("baseline", "")
    intro = (
        f"The ramdisks of each transfer mode served by this build's biusctl (new) and by the baseline "
        f"biusctl{' `' + build + '`' if build else ''} (old, devices `<name>@base`), same bius.ko, "
        "same jobs in the same repetition loop."
    )
    return compare(r, jobs, sweep, pairs, "Baseline: this biusctl against an older one, same boot", intro)


def statistics(r, jobs, sweep):
    """The cost of the statistics: devices <name> against <name>-nostats."""
    pairs = [(d[: -len("-nostats")], d) for d in r.devices if d.endswith("-nostats")]
    intro = (
        "The same device with the statistics every BIUS device keeps (new: `biusctl stats`) and "
        "without them (old: `biusctl create --no-stats`, devices `<name>-nostats`), same jobs in "
        "the same repetition loop: what keeping them costs."
    )
    return compare(r, jobs, sweep, pairs, "Statistics: their cost, same boot", intro)


def compare(r, jobs, sweep, pairs, heading, intro):
    """A table of new / old for each (new, old) device pair of `pairs`."""
    pairs = [(new, old) for new, old in pairs if new in r.devices and old in r.devices]
    if not pairs:
        return [], {}
    lines, summary = [], {}
    w = lines.append
    w(f"## {heading}")
    w("")
    w(
        intro + " Cells: new / old medians = new/old; then "
        "≈ when the spreads (min–max) overlap, + when new is better beyond them, − when worse "
        "(for latency lower is better)."
    )
    w("")
    w("| job | " + " | ".join(new for new, _ in pairs) + " |")
    w("|---|" + "---:|" * len(pairs))
    rows = [(job, f"{title} ({unit})", key, higher) for job, title, key, unit, higher in jobs]
    rows += [(f"sweep-{bs}", f"Sequential read {bs}, 4 jobs (MiB/s)", "bw", True) for bs in sweep]
    for job, title, key, higher in rows:
        cells, any_cell = [], False
        for new, old in pairs:
            sn, so = r.stat(new, job, key), r.stat(old, job, key)
            if not sn or not so:
                cells.append("–")
                continue
            any_cell = True
            q = ratio(sn["median"], so["median"])
            if sn["min"] <= so["max"] and so["min"] <= sn["max"]:
                mark = "≈"
            else:
                mark = "+" if (sn["median"] > so["median"]) == higher else "−"
            cells.append(f"{fmt(sn['median'])} / {fmt(so['median'])} = {fmt(q)} {mark}")
            summary.setdefault(new, {})[f"{job}:{key}"] = {"new": sn["median"], "old": so["median"], "new_over_old": q}
        if any_cell:
            w(f"| {title} | " + " | ".join(cells) + " |")
    w("")
    return lines, summary


def tables(r, jobs, sweep):
    """All the suites' tables, in order; and their summary."""
    lines, summary = [], {}
    for name, (ls, s) in (
        ("baseline", baseline(r, jobs, sweep)),
        ("statistics", statistics(r, jobs, sweep)),
        ("inflight", inflight(r)),
        ("file", backend(r, "file")),
        ("nbd", backend(r, "nbd")),
        ("zoned", zoned(r)),
    ):
        lines += ls
        if s:
            summary[name] = s
    return lines, summary
