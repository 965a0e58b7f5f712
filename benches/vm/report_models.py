#!/usr/bin/env python3
"""The models suite's report: each device model measured against its own
numbers (benches/vm/guest/models.sh made the runs).

    report_models.py RESULTS-DIR

Reads RESULTS-DIR/bench/models/ and writes RESULTS-DIR/models.md (the
table), models.json, models.gp (gnuplot script for models-*.png) and its
data in RESULTS-DIR/models-data/.  Standard library only.

Every prediction comes from the profile the device ran with, as `biusctl
info --json` reported it (overrides and time scale included), through the
model's equations (benches/README.md, *Models suite*).  Measured times are
real times: a device at time scale S shows S times its device time, plus
BIUS's own overhead, measured in the same boot on ramdisks without a model
(ovh-lat5ms: --latency 5ms, the same deferred completion; ovh-ram: no
delay at all).  So the measured device time is (real - overhead) / S, and
IOPS and bandwidths are multiplied by S.

Completion-time precision (group precision): a 10 ms `--latency` ramdisk
with the bench's poll time and with none, and null_blk's 10 ms timer
device, at QD1 and QD8 in the same boot: fio's completion latency over 10
ms for all three, and for BIUS the daemon's own lateness (`biusctl stats`:
from each completion's due time to its write).  The model rows' notes have
each device's lateness too, in real and in device time.
"""

import json
import math
import os
import re
import sys

from report_drives import accuracy, accuracy_markdown, precision
from report_util import fmt_bw, fmt_num, fmt_time, mean, read_json, read_log

KIB = 4096
LAT_REF = 5e-3  # ovh-lat5ms's --latency
ZONE_REF = 50e-3  # ovh-zoned-lat50ms's --latency zone=
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kib": 1024, "kb": 1000, "m": 1 << 20, "mib": 1 << 20, "mb": 10**6,
              "g": 1 << 30, "gib": 1 << 30, "gb": 10**9, "t": 1 << 40, "tib": 1 << 40, "tb": 10**12}


# --- quantities as `biusctl model show --json` writes them -----------------
def parse_time(v):
    """'35us 760ns', '2ms', '0' or a number of ns -> seconds."""
    if isinstance(v, (int, float)):
        return v * 1e-9
    parts = re.findall(r"([\d.]+)\s*([a-zµ]+)", v.strip())
    if not parts:
        return float(v) * 1e-9
    return sum(float(n) * TIME_UNITS[u] for n, u in parts)


def parse_bytes(v):
    """'32KiB', '33.5MiB', '1GB' or a number -> bytes."""
    if isinstance(v, (int, float)):
        return float(v)
    m = re.fullmatch(r"\s*([\d.]+)\s*([A-Za-z]*)\s*", v.replace("/s", ""))
    return float(m.group(1)) * SIZE_UNITS[m.group(2).lower()]


class Profile:
    """A resolved profile: p.t('flash.read_4k') seconds, p.b(...) bytes (and
    bytes a second), p.n(...) a plain number; None when absent."""

    def __init__(self, d):
        self.d = d
        self.kind = d.get("kind")
        self.name = d.get("name")
        self.scale = float(d.get("time_scale", 1.0))

    def get(self, key):
        v = self.d
        for k in key.split("."):
            if not isinstance(v, dict) or k not in v:
                return None
            v = v[k]
        return v

    def t(self, key):
        v = self.get(key)
        return None if v is None else parse_time(v)

    def b(self, key):
        v = self.get(key)
        return None if v is None else parse_bytes(v)

    def n(self, key):
        v = self.get(key)
        return None if v is None else float(v)


# --- the model's equations --------------------------------------------------
def predict(p):
    """Device-time predictions of profile p (seconds, IOPS, bytes a second)."""
    f = {"kind": p.kind}
    host_r, host_w = p.b("host.read_bandwidth"), p.b("host.write_bandwidth")
    if p.kind in ("ssd", "zns"):
        ch, dpc = p.n("flash.channels"), p.n("flash.dies_per_channel")
        ch_bw, pu = p.b("flash.channel_bandwidth"), p.b("flash.program_unit")
        dies = ch * dpc
        xfer = KIB / ch_bw
        ovh = p.t("host.overhead") or 0.0
        f["read_qd1"] = p.t("firmware.read_4k") + p.t("flash.read_4k") + xfer + KIB / host_r + ovh
        f["peak_iops"] = min(dies / (p.t("flash.read_4k") + xfer), ch * ch_bw / KIB, host_r / KIB)
        f["peak_why"] = "min(dies / (read_4k + 4K/channel), channels x channel_bw / 4K, host / 4K)"
        # random reads land on dies at random: a closed queueing network
        f["stations"], f["service"] = dies, p.t("flash.read_4k") + xfer
        f["write_qd1"] = KIB / host_w + p.t("firmware.write") + p.t("firmware.write_per_4k") + ovh
        f["seqread"] = min(host_r, ch * ch_bw, dies * pu / (p.t("flash.read_page") + pu / ch_bw))
        wdies = dies if p.kind == "ssd" else min(dies, p.n("zones.dies_per_zone") or dies)
        f["flash_write"] = min(min(ch, wdies) * ch_bw, wdies * pu / p.t("flash.program"))
        f["seqwrite"] = min(host_w, f["flash_write"])
        zone_buffer = p.b("zones.zone_buffer") if p.kind == "zns" else None
        if zone_buffer:
            # one zone's stream: its buffer's room frees a unit at a time as
            # units are programmed, and a 128K write waits for room for all
            # of it: half a write's room sits idle on average (ZnsMedia
            # alone, closed loop at depth 4: 1.164 GB/s for 1.18 here)
            idle = 64 * 1024
            f["seqwrite"] = min(f["seqwrite"], (zone_buffer - idle) / (p.t("flash.program") + pu / ch_bw))
        f["write_buffer"] = p.b("flash.write_buffer") or 0
        f["buffer_write"] = host_w
        if f["write_buffer"] and f["flash_write"] < host_w:
            f["knee_bytes"] = f["write_buffer"] / (1 - f["flash_write"] / host_w)
        rho = p.n("ftl.over_provisioning")
        if rho:
            f["waf"] = (1 + rho) / (2 * rho)
            # ssd.rs: the dies program WA pages per host page and read
            # WA - 1 to move them, a read holding its die until its unit
            # is out over the channel
            f["gc_read"] = p.t("flash.read_page") + pu / ch_bw
            slow = f["waf"] + (f["waf"] - 1) * f["gc_read"] / p.t("flash.program")
            f["steady_write_iops"] = f["flash_write"] / (slow * KIB)
    elif p.kind == "nvm":
        acc, units = p.b("nvm.access_size"), p.n("nvm.units")
        n4 = math.ceil(KIB / acc)
        f["read_qd1"] = n4 * p.t("nvm.read") + KIB / host_r
        f["peak_iops"] = min(units / (n4 * p.t("nvm.read")), host_r / KIB)
        f["peak_why"] = "min(units / read, host / 4K)"
        f["write_qd1"] = KIB / host_w + n4 * p.t("nvm.write")
        bs = 128 * 1024
        nb = math.ceil(bs / acc)
        f["seqread"] = min(host_r, units * bs / (nb * p.t("nvm.read")))
        f["seqwrite"] = min(host_w, units * bs / (nb * p.t("nvm.write")))
    elif p.kind == "hdd":
        hdd = p.get("hdd") or {}
        seek = next((parse_time(v) for k, v in hdd.items() if "seek" in k and ("avg" in k or "average" in k)), None)
        # media rates: outer (offset 0) to inner, the first one written first
        rates = [parse_bytes(v) for v in hdd.values() if isinstance(v, str) and v.endswith("/s")]
        rpm = p.n("hdd.rpm")
        if seek is not None and rpm and rates:
            f["read_qd1"] = seek + 30.0 / rpm + KIB / mean(rates) + KIB / host_r
            f["peak_iops"] = 1 / f["read_qd1"]
            f["peak_why"] = "one actuator: 1 / (average seek + half a turn + transfer)"
            f["parallel"] = 1.0
        if rates:
            f["seqread"] = min(rates[0], host_r)
    if p.get("zones"):
        # zone_times: a zone finished, then reset (zns: with one block
        # written first, so the finish pads the rest of the capacity at
        # flash speed and the reset erases next to nothing): the firmware,
        # the fixed reset, the command's overhead (zns.rs)
        fixed, pad = 0.0, 0.0
        if p.kind == "zns":
            fixed = (p.t("firmware.zone") or 0.0) + (p.t("host.overhead") or 0.0)
            cap = p.b("zones.capacity") or p.b("zones.size")
            pad = (cap - KIB) / f["flash_write"]
        f["reset"] = p.t("zones.reset") + fixed
        f["finish"] = p.t("zones.finish") + pad + fixed
        f["max_open"], f["max_active"] = p.n("zones.max_open") or 0, p.n("zones.max_active") or 0
    if "read_qd1" in f and "peak_iops" in f and "parallel" not in f:
        f["parallel"] = f["peak_iops"] * f["read_qd1"]
    return f


def mva(n, stations, service, think, peak):
    """IOPS of n reads in flight, each visiting one of `stations` dies at
    random (busy `service` each) and spending `think` elsewhere (firmware,
    links, BIUS's overhead): exact mean-value analysis, capped at peak."""
    queue, demand = 0.0, service / stations
    for k in range(1, n + 1):
        resid = demand * (1 + queue)
        x = k / (think + stations * resid)
        queue = x * resid
    return min(x, peak)


def modelled_iops(f, d, overhead):
    """The model's random 4K read IOPS at depth d, with `overhead` (device
    time) added to every read."""
    lat = f["read_qd1"] + overhead
    if f.get("stations"):
        return mva(d, f["stations"], f["service"], lat - f["service"], f["peak_iops"])
    return min(d / lat, f["peak_iops"])


# --- what the guest measured ------------------------------------------------
class Run:
    """One fio run: lat mean (s), iops, bw (bytes/s) of its direction."""

    def __init__(self, path):
        j = read_json(path)
        job = j["jobs"][0]
        d = "read" if job["read"]["io_bytes"] > 0 else "write"
        s = job[d]
        self.lat = s["lat_ns"]["mean"] * 1e-9
        self.iops = s["iops"]
        self.bw = s["bw_bytes"]
        self.ios = s["total_ios"]
        self.errors = job.get("error", 0)
        clat = s.get("clat_ns") or {}
        pct = clat.get("percentile") or {}
        self.clat = {
            "mean": clat.get("mean", 0) * 1e-9,
            "p50": pct.get("50.000000", 0) * 1e-9,
            "p99": pct.get("99.000000", 0) * 1e-9,
            "max": clat.get("max", 0) * 1e-9,
        }


class Measured:
    def __init__(self, base):
        self.base = base
        self.devices = []
        with open(os.path.join(base, "devices.txt")) as fh:
            self.devices = [line.split()[0] for line in fh if line.strip()]
        self.runs = {}
        with open(os.path.join(base, "runs.txt")) as fh:
            for line in fh:
                _, job, dev, stem = line.split()
                try:
                    self.runs[(dev, job)] = Run(os.path.join(base, "fio", stem + ".json"))
                except (TypeError, KeyError, IndexError) as err:
                    print(f"report_models: skipping {stem}: {err}", file=sys.stderr)
        self.meta = {}
        if os.path.exists(os.path.join(base, "meta.txt")):
            with open(os.path.join(base, "meta.txt")) as fh:
                for line in fh:
                    k, _, v = line.strip().partition(" ")
                    self.meta[k] = v

    def run(self, dev, job):
        return self.runs.get((dev, job))

    def profile(self, dev):
        j = read_json(os.path.join(self.base, "info", dev + ".json"))
        model = (j or {}).get("model")
        return Profile(model["profile"]) if model else None

    def stats(self, dev):
        j = read_json(os.path.join(self.base, "info", dev + ".end.json"))
        return ((j or {}).get("model") or {}).get("stats")

    def lateness(self, name):
        """The lateness of stats/NAME.json (`biusctl stats --json`):
        {count, mean, p50, p99, max} in seconds, or None."""
        j = read_json(os.path.join(self.base, "stats", name + ".json"))
        late = (j or {}).get("lateness")
        if not late or not late.get("count"):
            return None
        ns = late.get("ns") or {}
        out = {k: ns.get(k, 0) * 1e-9 for k in ("mean", "p50", "p99", "max")}
        out["count"] = late["count"]
        return out

    def zoneop(self, dev, test):
        """[(op, zone, errno name or 'ok', seconds)]"""
        out = []
        try:
            with open(os.path.join(self.base, "zoneop", f"{dev}-{test}.txt")) as fh:
                for line in fh:
                    w = line.split()
                    if len(w) >= 5 and w[0] == "zoneop":
                        status = "ok" if w[3] == "ok" else w[5]
                        out.append((w[1], int(w[2]), status, int(w[-1]) * 1e-9))
        except OSError:
            pass
        return out

    def log(self, dev, name):
        return read_log(os.path.join(self.base, "fio", dev, name))

    def waf_samples(self, dev):
        """[(uptime, host bytes, media bytes)]"""
        out = []
        try:
            with open(os.path.join(self.base, "waf", dev + ".txt")) as fh:
                for line in fh:
                    t, _, rest = line.partition(" ")
                    try:
                        st = json.loads(rest)["model"]["stats"]
                    except (ValueError, KeyError, TypeError):
                        continue
                    out.append((float(t), st["host_bytes_written"], st["media_bytes_written"]))
        except OSError:
            pass
        return out


class Report:
    def __init__(self, m):
        self.m = m
        self.rows = []  # dict per table row
        self.notes = []
        self.sweeps = {}  # dev -> [(depth, measured, modelled, modelled+ovh)]
        self.plots = []
        r = m.run("ovh-lat5ms", "rr-qd1")
        w = m.run("ovh-lat5ms", "rw-qd1")
        self.ovh_read = r.lat - LAT_REF if r else 0.0
        self.ovh_write = w.lat - LAT_REF if w else self.ovh_read
        pr, pw = m.run("ovh-ram", "rr-qd1"), m.run("ovh-ram", "rw-qd1")
        self.plain_read = pr.lat if pr else None
        self.plain_write = pw.lat if pw else None
        z = [s for op, _, st, s in m.zoneop("ovh-zoned-lat50ms", "times") if st == "ok"]
        self.ovh_zone = mean(z) - ZONE_REF if z else self.ovh_read
        cap = m.run("ovh-lat5ms", "rr-qd64")
        self.tcg_cap = cap.iops if cap else None

    def row(self, profile, what, scale, modelled, measured, target, fmt, note="", err=None, passed=None):
        numbers = all(isinstance(v, (int, float)) for v in (modelled, measured))
        if err is None and numbers and modelled:
            err = measured / modelled - 1
        if passed is None and err is not None and target is not None:
            passed = abs(err) <= target
        self.rows.append({
            "profile": profile, "measurement": what, "scale": scale,
            "modelled": fmt(modelled) if callable(fmt) else modelled,
            "measured": fmt(measured) if callable(fmt) else measured,
            "error": err, "target": target, "pass": passed, "note": note,
            "modelled_value": modelled if not isinstance(modelled, str) else None,
            "measured_value": measured if not isinstance(measured, str) else None,
        })

    # QD1 latency of a job: (real - overhead) / scale against the model
    def qd1(self, label, dev, job, p, f, key, what):
        run = self.m.run(dev, job)
        if not run or f.get(key) is None:
            return
        ovh = self.ovh_read if "read" in key else self.ovh_write
        plain = self.plain_read if "read" in key else self.plain_write
        real_model = f[key] * p.scale
        note = f"{run.ios} I/Os; mean {fmt_time(run.lat)} real, overhead {fmt_time(ovh)} subtracted"
        if plain and real_model < 20 * plain:
            note += f"; model x scale {fmt_time(real_model)} < 20x BIUS QD1 ({fmt_time(plain)}): TCG shows"
        late = self.m.lateness(dev)
        if late:
            note += (f"; completions late p50 {fmt_time(late['p50'])}, p99 {fmt_time(late['p99'])} real "
                     f"({fmt_time(late['p99'] / p.scale)} device time)")
        self.row(label, what, p.scale, f[key], (run.lat - ovh) / p.scale, 0.10, fmt_time, note)

    def sweep(self, label, dev, p, f):
        pts = []
        for job, run in sorted(((j, r) for (d, j), r in self.m.runs.items() if d == dev and j.startswith("rr-qd")),
                               key=lambda x: int(x[0][5:])):
            d = int(job[5:])
            mod = ovh = None
            if f.get("read_qd1"):
                mod = modelled_iops(f, d, 0.0)
                ovh = modelled_iops(f, d, self.ovh_read / p.scale)
            pts.append((d, run.iops * p.scale, mod, ovh))
        if not pts:
            return
        self.sweeps[label] = pts
        if not f.get("peak_iops"):
            self.row(label, "4K randread IOPS, flat level", p.scale, "n/a", fmt_num(pts[-1][1]), None, None,
                     "the profile gives no figures to predict it from")
            return
        par = f["parallel"]
        how = ("dies at random: exact MVA, QD1 latency + overhead/scale" if f.get("stations")
               else "min(d / (QD1 latency + overhead/scale), peak)")
        grow = [x for x in pts if x[0] <= par / 2]
        if grow:
            d, meas, _, ovh = grow[-1]
            self.row(label, f"4K randread IOPS, depth {d} (growing; parallelism {par:.1f})", p.scale, ovh, meas,
                     0.10, fmt_num, f"modelled: {how}")
        flat = [x for x in pts if x[0] >= 2 * par]
        d, meas, _, ovh = flat[-1] if flat else pts[-1]
        note = f"limit {fmt_num(f['peak_iops'])} = {f['peak_why']}; modelled at this depth: {how}"
        real_peak = f["peak_iops"] / p.scale
        if not flat:
            note += f"; deepest run (depth {d}) < 2 x parallelism: not flat yet"
        if self.tcg_cap and real_peak > 0.5 * self.tcg_cap:
            note += (f"; TCG: {real_peak:.0f} real IOPS asked, the 5 ms ramdisk reached "
                     f"{self.tcg_cap:.0f} at depth 64")
        self.row(label, f"4K randread IOPS, flat (depth {d}, {meas / f['peak_iops'] * 100:.0f}% of the limit)",
                 p.scale, ovh, meas, 0.10 if flat else None, fmt_num, note)

    def seq(self, label, dev, p, f):
        for job, key, what in (("seqread", "seqread", "128K seq read bandwidth"),
                               ("seqwrite", "seqwrite", "128K seq write bandwidth (sustained)")):
            run = self.m.run(dev, job)
            if run and f.get(key):
                note = f"{run.ios} I/Os"
                if key == "seqwrite" and p.kind == "zns":
                    note += "; one zone: min(host, dies, (zone_buffer - 64K) / (program + program_unit / channel))"
                self.row(label, what, p.scale, f[key], run.bw * p.scale, 0.10, fmt_bw, note)

    def device(self, label, dev, groups=("qd1r", "sweep", "qd1w", "seq")):
        p = self.m.profile(dev)
        if not p:
            if any(d == dev for d, _ in self.m.runs):
                self.notes.append(f"{dev}: no model in `biusctl info --json` (info/{dev}.json)")
            return None, None
        f = predict(p)
        if "qd1r" in groups:
            self.qd1(label, dev, "rr-qd1", p, f, "read_qd1", "QD1 4K randread latency")
        if "sweep" in groups:
            self.sweep(label, dev, p, f)
        if "qd1w" in groups:
            what = "QD1 4K seq write latency (zone)" if p.kind in ("zns",) else "QD1 4K randwrite latency"
            self.qd1(label, dev, "rw-qd1", p, f, "write_qd1", what)
        if "seq" in groups:
            self.seq(label, dev, p, f)
        return p, f

    def zones(self, label, dev, p, f):
        for op in ("finish", "reset"):
            times = [s for o, _, st, s in self.m.zoneop(dev, "times") if o == op and st == "ok"]
            if times and f.get(op) is not None:
                self.row(label, f"zone {op} latency", p.scale, f[op], (mean(times) - self.ovh_zone) / p.scale, 0.10,
                         fmt_time, f"{len(times)} ops; overhead {fmt_time(self.ovh_zone)} subtracted "
                                   "(ovh-zoned-lat50ms)")
        ref = "null_blk-zoned"
        for test, what in (("implicit", "4K writes into zone after zone"), ("explicit", "explicit zone opens")):
            got = first_failure(self.m.zoneop(dev, test))
            want = first_failure(self.m.zoneop(ref, test))
            if got is None and want is None:
                continue
            limit = int(f.get("max_active") or f.get("max_open") or 0)
            modelled = f"fails at zone {limit} (open {int(f.get('max_open', 0))}, active {int(f.get('max_active', 0))})"
            ok = got is not None and got == want and got[0] == limit
            self.row(label, f"zone limits: {what}", p.scale, modelled, show_failure(got), None, None,
                     f"null_blk (zone_max_open/active 14): {show_failure(want)}", passed=ok)

    def buffer(self, label, dev):
        p = self.m.profile(dev)
        log = self.m.log(dev, "buffer_bw.1.log")
        if not p or not log:
            return
        f = predict(p)
        s = p.scale
        pts = [(t, kib * 1024 * s) for t, kib in log]  # device bytes a second at real time t
        h, fl = f["buffer_write"], f["seqwrite"]
        mid = (h + fl) / 2
        knee, written, prev = None, 0.0, 0.0
        for i, (t, bw) in enumerate(pts):
            if i > 0 and bw < mid and knee is None:
                knee = (t, written)
            written += bw / s * (t - prev)
            prev = t
        before = [bw for t, bw in pts[1:] if knee and t < knee[0]] or [pts[0][1]]
        after = [bw for t, bw in pts[len(pts) // 2:]]
        self.row(label, "seq write 32K QD16: buffer speed", s, h, mean(before), 0.10, fmt_bw,
                 f"{len(before)} samples of 250 ms before the drop")
        self.row(label, "seq write 32K QD16: flash speed (second half)", s, fl, mean(after), 0.10, fmt_bw,
                 "dies x program_unit / program")
        if f.get("knee_bytes"):
            self.row(label, "written when the buffer fills", s, f["knee_bytes"],
                     knee[1] if knee else None, 0.25, lambda v: fmt_num(v, "B"),
                     "buffer / (1 - flash/host); 250 ms resolution")
        self.buffer_plot = (pts, f, s)

    def ftl(self, label, dev):
        p = self.m.profile(dev)
        samples = self.m.waf_samples(dev)
        if not p or len(samples) < 3:
            return
        f = predict(p)
        rho = p.n("ftl.over_provisioning")
        info = read_json(os.path.join(self.m.base, "info", dev + ".json")) or {}
        cap = info.get("size") or 128 << 20
        h0 = samples[0][1]
        rand = [(h - h0, mb) for _, h, mb in samples]
        total = rand[-1][0]
        cut = next(x for x in rand if x[0] >= 0.6 * total)
        steady = ((rand[-1][1] - cut[1]) / (rand[-1][0] - cut[0])) if rand[-1][0] > cut[0] else None
        stats = self.m.stats(dev) or {}
        note = (f"random writes: {total / cap:.2f} x the {cap >> 20} MiB device; WAF over their last 40%; "
                f"cumulative (info, precondition included) {stats.get('write_amplification') or 0:.2f}; "
                + ftl_reserve(p, cap))
        if total == 0:
            note += "; the model counted no host writes"
        elif total < 1.5 * cap:
            note += "; under 1.5 device writes: not yet steady"
        self.row(label, f"write amplification, op {rho}", p.scale, f["waf"], steady, 0.15,
                 lambda v: "–" if v is None else f"{v:.2f}", note)
        iops = self.m.log(dev, "waf_iops.1.log")
        if iops:
            tail = [v * p.scale for t, v in iops[int(len(iops) * 0.7):]]
            note = ("flash write bw / 4K / (WA + (WA - 1) x (read_page + unit/channel) / program) (ssd.rs), "
                    "WA = (1+op)/(2 op); last 30% of the run")
            if steady:
                slow = steady + (steady - 1) * f["gc_read"] / p.t("flash.program")
                note += f"; with the measured WA {steady:.2f}: {fmt_num(f['flash_write'] / (slow * KIB))}"
            self.row(label, f"4K randwrite IOPS, steady state, op {rho}", p.scale, f["steady_write_iops"], mean(tail),
                     0.15, fmt_num, note)
        self.waf_plot = getattr(self, "waf_plot", [])
        self.waf_plot.append((rho, f["waf"], samples, cap))


def ftl_reserve(p, cap):
    """What ftl.rs keeps out of the spare superblocks: gc_threshold free
    ones and the two open ones (host and GC streams)."""
    dies = p.n("flash.channels") * p.n("flash.dies_per_channel")
    per_sb = p.b("ftl.block_size") * dies
    needed = math.ceil(cap / per_sb)
    thr = p.n("ftl.gc_threshold") or 2
    spare = max(math.ceil(cap * p.n("ftl.over_provisioning") / per_sb), thr + 3)
    eff = (spare - thr - 2) / needed
    return (f"{spare:.0f} spare superblocks of {per_sb / 2**20:g} MiB, {thr:.0f} kept free + 2 open: "
            f"effective op {eff:.3f}, (1+op)/(2 op) = {(1 + eff) / (2 * eff):.2f}")


def first_failure(ops):
    for _, zone, status, _ in ops:
        if status != "ok":
            return (zone, status)
    return None if not ops else ("none", "ok")


def show_failure(x):
    if x is None:
        return "–"
    if x == ("none", "ok"):
        return "no failure"
    return f"zone {x[0]}: {x[1]}"


# --- output -----------------------------------------------------------------
def markdown(rep, m):
    w = []
    w.append("# Device models against their own numbers")
    w.append("")
    w.append(
        "`bash scripts/bench.sh suites=models` (benches/README.md, *Models suite*): one VM boot (QEMU TCG), "
        "each model a BIUS ramdisk with `--model` and `--time-scale SCALE`, one queue, fio libaio. "
        "*Modelled*: the model's equations on the profile the device ran with (`biusctl info --json`). "
        "*Measured*: in device time: latency (real − BIUS overhead) / scale, IOPS and bandwidth × scale. "
        "Error = measured / modelled − 1.")
    w.append("")
    w.append(
        f"BIUS overhead in this boot: QD1 4K read on a 5 ms `--latency` ramdisk {fmt_time(rep.ovh_read)} over 5 ms "
        f"(write {fmt_time(rep.ovh_write)}), the figure subtracted; a plain ramdisk's whole QD1 read "
        f"{fmt_time(rep.plain_read)}, write {fmt_time(rep.plain_write)}; zone finish/reset "
        f"{fmt_time(rep.ovh_zone)} over 50 ms; the 5 ms ramdisk at depth 64: "
        f"{fmt_num(rep.tcg_cap)} IOPS (ideal 12.8 k): what TCG carries.")
    w.append("")
    w.append("| profile | measurement | scale | modelled | measured | error | target | result | notes |")
    w.append("|---|---|---:|---:|---:|---:|---:|---|---|")
    for r in rep.rows:
        err = "–" if r["error"] is None else f"{r['error'] * 100:+.1f}%"
        tgt = "–" if r["target"] is None else f"±{r['target'] * 100:.0f}%"
        res = "–" if r["pass"] is None else ("pass" if r["pass"] else "**fail**")
        scale = f"{r['scale']:g}×"
        w.append(f"| {r['profile']} | {r['measurement']} | {scale} | {r['modelled']} | {r['measured']} "
                 f"| {err} | {tgt} | {res} | {r['note']} |")
    w.append("")
    if rep.sweeps:
        w.append("## Random 4K read IOPS by depth (device time)")
        w.append("")
        w.append("Modelled: NVM units are a pool: min(depth / QD1 latency, peak); flash reads land on dies at "
                 "random: exact mean-value analysis of a closed network (dies busy read_4k + 4K/channel each, "
                 "the rest of the QD1 latency as delay), capped at the limit; + overhead: with BIUS's overhead "
                 "/ scale added to the QD1 latency.")
        w.append("")
        for label, pts in rep.sweeps.items():
            w.append(f"**{label}**: " + ", ".join(
                f"d{d} {fmt_num(meas)}" + (f" ({fmt_num(ovh)})" if ovh else "") for d, meas, _, ovh in pts))
            w.append("")
        w.append("(measured, and in brackets modelled with overhead)")
        w.append("")
    for n in rep.notes:
        w.append(f"- {n}")
    w.append("")
    w.append("![IOPS by depth](models-iops.png)")
    for png in rep.plots:
        w.append(f"![{png}]({png})")
    w.append("")
    w.append(f"Suite time in the VM: {m.meta.get('elapsed_s', '?')} s; fio runs of {m.meta.get('runtime', '?')} s "
             f"+ {m.meta.get('ramp', '?')} s ramp; groups: {m.meta.get('groups', '?')}.")
    return "\n".join(w) + "\n"


def write_dat(path, rows):
    with open(path, "w") as fh:
        for r in rows:
            fh.write(" ".join("nan" if v is None else f"{v:g}" for v in r) + "\n")


def cdf(values):
    xs = sorted(values)
    return [(x, (i + 1) / len(xs)) for i, x in enumerate(xs)]


def plots(rep, m, res):
    data = os.path.join(res, "models-data")
    os.makedirs(data, exist_ok=True)
    gp = ["set terminal pngcairo size 1380,820 font 'sans,10' noenhanced", "set output 'models-iops.png'"]
    n = len(rep.sweeps) or 1
    cols = min(3, n)
    gp.append(f"set multiplot layout {math.ceil(n / cols)},{cols} title 'Random 4K read IOPS by depth, device time'")
    gp += ["set logscale x 2", "set yrange [0:*]", "set xlabel 'iodepth'", "set ylabel 'IOPS'", "set key right bottom", "set grid"]
    for label, pts in rep.sweeps.items():
        f = "models-data/iops-" + re.sub(r"[^A-Za-z0-9.-]+", "_", label) + ".dat"
        write_dat(os.path.join(res, f), pts)
        gp.append(f"set title '{label}'")
        gp.append(f"plot '{f}' u 1:2 w lp pt 7 t 'measured', '' u 1:3 w l dt 2 t 'modelled', "
                  f"'' u 1:4 w l t 'modelled + overhead'")
    gp.append("unset multiplot")
    gp += ["unset logscale", "set key right bottom"]
    # QD1 latency CDF of nvme-ssd
    lat = [v * 1e-9 for _, v in m.log("nvme-ssd-qd1", "rr-qd1_lat.1.log")]
    ovh = [v * 1e-9 - LAT_REF for _, v in m.log("ovh-lat5ms", "rr-qd1_lat.1.log")]
    p = m.profile("nvme-ssd-qd1")
    if lat and p:
        model = predict(p)["read_qd1"] * p.scale
        write_dat(os.path.join(data, "cdf-measured.dat"), [(x * 1e3, y) for x, y in cdf(lat)])
        write_dat(os.path.join(data, "cdf-modelled.dat"), [(model * 1e3, 0), (model * 1e3, 1)])
        if ovh:
            write_dat(os.path.join(data, "cdf-overhead.dat"), [((model + x) * 1e3, y) for x, y in cdf(ovh)])
        gp += ["set output 'models-lat-cdf.png'", "set terminal pngcairo size 900,560 font 'sans,10' noenhanced",
               f"set title 'nvme-ssd QD1 4K random read latency at {p.scale:g}x (real time)'",
               "set xlabel 'ms'", "set ylabel 'fraction of reads'", "set yrange [0:1]",
               "plot 'models-data/cdf-measured.dat' u 1:2 w l lw 2 t 'measured', "
               "'models-data/cdf-modelled.dat' u 1:2 w l dt 2 t 'model x scale', "
               + ("'models-data/cdf-overhead.dat' u 1:2 w l t 'model x scale + overhead (5 ms ramdisk)'"
                  if ovh else "1/0 notitle"),
               "set yrange [*:*]"]
        rep.plots.append("models-lat-cdf.png")
    if getattr(rep, "buffer_plot", None):
        pts, f, s = rep.buffer_plot
        knee_t = f.get("knee_bytes", 0) / f["buffer_write"] * s
        end = pts[-1][0]
        write_dat(os.path.join(data, "buffer.dat"), [(t, bw / 1e6) for t, bw in pts])
        write_dat(os.path.join(data, "buffer-model.dat"),
                  [(0, f["buffer_write"] / 1e6), (knee_t, f["buffer_write"] / 1e6), (knee_t, f["seqwrite"] / 1e6),
                   (end, f["seqwrite"] / 1e6)])
        gp += ["set output 'models-buffer.png'", "set terminal pngcairo size 900,560 font 'sans,10' noenhanced",
               f"set title 'nvme-ssd (program 740us, 8 MiB buffer) at {s:g}x: sequential 32K writes, QD16'",
               "set xlabel 'real time, s'", "set ylabel 'device MB/s'",
               "plot 'models-data/buffer.dat' u 1:2 w lp pt 7 t 'measured (250 ms)', "
               "'models-data/buffer-model.dat' u 1:2 w l dt 2 t 'modelled'"]
        rep.plots.append("models-buffer.png")
    if getattr(rep, "waf_plot", None):
        plot = []
        for rho, waf, samples, cap in rep.waf_plot:
            f = f"models-data/waf-{rho}.dat"
            h0 = samples[0][1]
            rows = []
            for a, b in zip(samples, samples[1:]):
                dh = b[1] - a[1]
                if dh > 0:
                    rows.append(((b[1] - h0) / cap, (b[2] - a[2]) / dh, b[2] / b[1]))
            write_dat(os.path.join(res, f), rows)
            plot += [f"'{f}' u 1:2 w lp pt 7 t 'op {rho}: WAF of each 2 s'", f"'' u 1:3 w l t 'op {rho}: cumulative'",
                     f"{waf} w l dt 2 t 'op {rho}: (1+op)/(2 op) = {waf:.2f}'"]
        gp += ["set output 'models-waf.png'", "set terminal pngcairo size 900,560 font 'sans,10' noenhanced",
               "set title 'nvme-ssd, 4K random writes after a sequential fill: write amplification'",
               "set xlabel 'random data written / device size'", "set ylabel 'WAF'", "set key right center",
               "plot " + ", ".join(plot)]
        rep.plots.append("models-waf.png")
    with open(os.path.join(res, "models.gp"), "w") as fh:
        fh.write("\n".join(gp) + "\n")


def main():
    res = sys.argv[1]
    m = Measured(os.path.join(res, "bench", "models"))
    rep = Report(m)
    rep.device("custom (4 units, 2 ms)", "custom")
    rep.device("nvm", "nvm")
    rep.device("nvme-ssd", "nvme-ssd-qd1", ("qd1r",))
    rep.device("nvme-ssd", "nvme-ssd-qd1w", ("qd1w",))
    rep.device("nvme-ssd", "nvme-ssd", ("sweep", "seq"))
    rep.buffer("nvme-ssd, program 740us, buffer 8MiB", "nvme-ssd-buffer")
    for op in ("0.07", "0.28"):
        rep.ftl("nvme-ssd (FTL)", f"nvme-ssd-op{op}")
    rep.device("zns-ssd", "zns-ssd", ("qd1r", "sweep", "seq"))
    rep.device("zns-ssd", "zns-ssd-qd1w", ("qd1w",))
    zp = m.profile("zns-ssd-zones")
    if zp:
        rep.zones("zns-ssd", "zns-ssd-zones", zp, predict(zp))
    hp = m.profile("smr-hdd")
    if hp and "read_qd1" not in predict(hp):
        rep.notes.append("smr-hdd: its profile has no average seek time or media rate ([hdd]: "
                         f"{', '.join(sorted(hp.get('hdd') or {}))}): measured only, nothing to predict")
    rep.device("smr-hdd", "smr-hdd", ("qd1r", "sweep", "seq"))
    # the 5 ms ramdisk: what TCG carries, as a sweep of its own
    pts = [(d, r.iops, d / LAT_REF, d / (LAT_REF + rep.ovh_read)) for (dev, j), r in sorted(m.runs.items(), key=lambda x: (
        x[0][0], int(x[0][1][5:]) if x[0][1].startswith("rr-qd") else 0)) if dev == "ovh-lat5ms" and
           j.startswith("rr-qd") for d in [int(j[5:])]]
    if pts:
        rep.sweeps["no model, --latency 5ms (scale 1)"] = pts
    xp = m.profile("xg6")
    if xp:
        rep.device("xg6", "xg6", ("sweep", "seq"))
    drives = accuracy(rep, m, res)
    plots(rep, m, res)
    prec_lines, prec_rows = precision(m)
    with open(os.path.join(res, "models.md"), "w") as fh:
        fh.write(markdown(rep, m))
        if drives:
            fh.write("\n" + accuracy_markdown(drives))
        if prec_lines:
            fh.write("\n" + "\n".join(prec_lines))
    with open(os.path.join(res, "models.json"), "w") as fh:
        json.dump({"rows": rep.rows, "sweeps": rep.sweeps, "drives": drives, "overhead": {
            "read_s": rep.ovh_read, "write_s": rep.ovh_write, "zone_s": rep.ovh_zone,
            "plain_read_s": rep.plain_read, "plain_write_s": rep.plain_write, "tcg_cap_iops": rep.tcg_cap},
                   "precision": prec_rows}, fh, indent=1)
    passed = sum(1 for r in rep.rows if r["pass"])
    failed = sum(1 for r in rep.rows if r["pass"] is False)
    print(f"report_models: {len(rep.rows)} rows, {passed} pass, {failed} fail: {os.path.join(res, 'models.md')}")


if __name__ == "__main__":
    main()
