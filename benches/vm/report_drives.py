"""The models suite's tables against outside references: the device
models against measurements of the real drives (benches/criterion/accuracy/*.toml,
through `accuracy --json`), and the completion-time precision of a
`--latency` device against null_blk's timer, in one boot."""

import os

from report_util import fmt_time, read_json

PREC_REF = 10e-3  # the precision group's --latency and completion_nsec
PREC_DEVICES = ("prec-lat10ms", "prec-lat10ms-poll0", "null_blk-prec-lat10ms")

# --- the models against the real drives --------------------------------------
UNIT_SCALE = {"IOPS": 1.0, "MiB/s": 1.0 / (1 << 20), "MB/s": 1e-6, "GB/s": 1e-9, "us": 1e6, "ms": 1e3}


def vm_value(row, m, rep):
    """What BIUS in the VM gave for a reference row whose `vm` names the
    models suite's DEVICE:JOB, in the row's unit (None: not run)."""
    if not row.get("vm"):
        return None
    dev, _, job = row["vm"].partition(":")
    run, p = m.run(dev, job), m.profile(dev)
    if not run or not p:
        return None
    metric, scale = row["metric"], UNIT_SCALE[row["unit"]]
    if metric == "Iops":
        return run.iops * p.scale * scale
    if metric == "Bandwidth":
        return run.bw * p.scale * scale
    if metric == "LatMean":
        ovh = rep.ovh_read if job.startswith(("rr-", "seqread")) else rep.ovh_write
        return (run.lat - ovh) / p.scale * scale
    return None


def accuracy(rep, m, res):
    """The reference rows (RESULTS-DIR/accuracy.json, from `accuracy
    --json`) with BIUS in the VM where the suite ran their workload."""
    rows = read_json(os.path.join(res, "accuracy.json")) or []
    for r in rows:
        r["vm_value"] = vm_value(r, m, rep)
        r["vm_error"] = None if r["vm_value"] is None else r["vm_value"] / r["measured"] - 1
    return rows


def accuracy_markdown(rows):
    w = ["## The models against the real drives", "",
         "Each row: measured on the real drive (source: benches/criterion/accuracy/*.toml), the model alone in "
         "simulated time (`cargo run -p bius-benches --bin accuracy`), BIUS in this VM (device time, "
         "the suite's job named in the row's `vm`; – where the suite does not run that workload), and "
         "the errors against the drive. Target: calibration ±10%, validation ±20%.", "",
         "| profile | set | row | metric | measured | source | modelled | error | BIUS in VM | error | target |",
         "|---|---|---|---|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        unit = r["unit"]
        vm = "–" if r["vm_value"] is None else f"{r['vm_value']:.4g} {unit}"
        vm_err = "–" if r["vm_error"] is None else f"{r['vm_error'] * 100:+.1f}%"
        w.append(f"| {r['profile']} | {r['set']} | {r['row']} | {r['metric']} | {r['measured']:.4g} {unit} "
                 f"| {r['reference']}: {r['source']} | {r['modelled']:.4g} {unit} | {r['error'] * 100:+.1f}% | {vm} | {vm_err} "
                 f"| ±{r['target'] * 100:.0f}% |")
    return "\n".join(w) + "\n"


def precision(m):
    """The completion-time precision table (markdown lines) and its
    figures: per device and depth, fio's clat over 10 ms, and BIUS's own
    lateness."""
    rows, w = [], []
    for dev in PREC_DEVICES:
        for d in (1, 8):
            run = m.run(dev, f"rr-qd{d}")
            if not run:
                continue
            over = {k: v - PREC_REF for k, v in run.clat.items()}
            late = m.lateness(f"{dev}-rr-qd{d}")
            rows.append({"device": dev, "depth": d, "ios": run.ios, "clat_over_s": over, "lateness_s": late})
    if not rows:
        return w, rows
    w.append("## Completion-time precision: a 10 ms `--latency` against null_blk's 10 ms timer")
    w.append("")
    w.append(
        "4 KiB random reads for 8 s at QD1 and QD8, one queue, in this boot: prec-lat10ms "
        "(`biusctl create ramdisk --latency read=10ms`, the bench's poll time: its worker wakes before a due "
        "completion, by as much as its wake-ups have been late and at most that long, and polls until it is "
        "due), prec-lat10ms-poll0 (`--poll-us 0`: it sleeps until the due time itself), "
        "null_blk-prec-lat10ms (configfs `irqmode=2 completion_nsec=10000000`: the kernel completes each "
        "request from a timer). *fio over 10 ms*: fio's completion latency less 10 ms, what the application "
        "sees; *daemon lateness*: `biusctl stats` (`lateness`), from each completion's due time (10 ms after "
        "the worker read the request) to the worker writing it. The daemon lateness is the part of a "
        "model's time that BIUS misses; fio's figure adds the path around it: the worker's wake-up for the "
        "request (before its due time starts: not in the lateness), the kernel ending the request and waking "
        "fio (which null_blk pays too).")
    w.append("")
    w.append("| device | QD | I/Os | fio over 10 ms: mean | p50 | p99 | daemon lateness: p50 | p99 | max |")
    w.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        o, late = r["clat_over_s"], r["lateness_s"] or {}
        w.append(f"| {r['device']} | {r['depth']} | {r['ios']} | {fmt_time(o['mean'])} | {fmt_time(o['p50'])} "
                 f"| {fmt_time(o['p99'])} | {fmt_time(late.get('p50'))} | {fmt_time(late.get('p99'))} "
                 f"| {fmt_time(late.get('max'))} |")
    w.append("")
    ref = next((r for r in rows if r["device"] == PREC_DEVICES[2] and r["depth"] == 1), None)
    bius = next((r for r in rows if r["device"] == PREC_DEVICES[0] and r["depth"] == 1), None)
    if ref and bius:
        gap = bius["clat_over_s"]["mean"] - ref["clat_over_s"]["mean"]
        late = bius["lateness_s"] or {}
        w.append(
            f"At QD1 BIUS completes {fmt_time(gap)} after null_blk's timer (means), of which its daemon's "
            f"lateness is {fmt_time(late.get('mean'))} (mean). At time scale 1, that is what a model's "
            "completions miss in the application's view; at scale S, 1/S of it in device time.")
        w.append("")
    return w, rows
