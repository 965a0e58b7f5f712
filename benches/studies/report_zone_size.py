#!/usr/bin/env python3
"""The zone-size study's report: RocksDB on F2FS (or ZenFS: runs with
fs=zenfs) on zoned disks of 64, 128 and 256 MiB zones
(benches/studies/guest/zone-size.sh made the runs).

    report_zone_size.py RESULTS-DIR

Reads RESULTS-DIR/zs/ and writes RESULTS-DIR/zone-size.md (the tables),
zone-size.json, zone-size.gp (gnuplot script for zone-size-*.png, the
figures 6-9 of the study) and its data in RESULTS-DIR/zone-size-data/.
Standard library only.

Bytes, per run, from the end of mkfs + mount to the end of the mix (load
and mix, each followed by waitforcompaction and sync):
  user     keys + values the application put (db_bench's keys written x
           (key size + value size), rocksdb.number.keys.written)
  RocksDB  what RocksDB wrote: WAL + flush + compaction output
           (rocksdb.wal.bytes, rocksdb.flush.write.bytes,
           rocksdb.compact.write.bytes; --statistics, both processes)
  device   what reached the disk: write sectors of `/sys/block/<disk>/stat`,
           or for BIUS with `biusctl stats`, its own count (the two are
           compared, they must agree exactly)
RocksDB's write amplification is RocksDB / user, F2FS's (ZenFS's) device /
RocksDB.
Zone fill: each sequential zone's write pointer / capacity at the end
(`blkzone report`, or `biusctl stats --json --zones` for BIUS); space
amplification: capacity of the non-empty sequential zones / live data
(the database's files, du --apparent-size; ZenFS: the sum of the sizes
`zenfs list` gives for the database's directory).
"""

import json
import os
import re
import sys

SECTOR = 512
GIB = 1 << 30
MIB = 1 << 20
BUCKETS = [f"{10 * i}-{10 * (i + 1)}%" for i in range(10)]
LABEL = {"bius": "BIUS", "nullb": "null_blk"}
FS_LABEL = {"f2fs": "F2FS", "zenfs": "ZenFS"}


def read(path, default=None):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return default


def read_json(path):
    text = read(path)
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def kv_file(path):
    """'key value...' lines -> dict of strings."""
    out = {}
    for line in (read(path) or "").splitlines():
        k, _, v = line.partition(" ")
        if k:
            out[k] = v.strip()
    return out


def disk_stat(path):
    """/sys/block/X/stat -> dict (Documentation/block/stat.rst)."""
    f = (read(path) or "").split()
    if len(f) < 11:
        return None
    names = ["read_ios", "read_merges", "read_sectors", "read_ticks", "write_ios", "write_merges",
             "write_sectors", "write_ticks", "in_flight", "io_ticks", "time_in_queue",
             "discard_ios", "discard_merges", "discard_sectors", "discard_ticks", "flush_ios", "flush_ticks"]
    return {n: int(v) for n, v in zip(names, f)}


def tickers(path):
    """db_bench --statistics: 'rocksdb.x COUNT : N' -> {x: N} (the last
    STATISTICS block of the file, cumulative over its benchmarks)."""
    out = {}
    for m in re.finditer(r"^rocksdb\.([\w.]+) COUNT : (\d+)$", read(path) or "", re.M):
        out[m.group(1)] = int(m.group(2))
    return out


def db_stats(path):
    """The last 'Cumulative compaction: X GB write' (flushes included) and
    'Cumulative WAL: ... written: X GB' of db_bench's `stats` -> bytes (to
    0.01 GB, which RocksDB means as GiB: a coarse check of the tickers)."""
    t = read(path) or ""
    comp = re.findall(r"^Cumulative compaction: ([\d.]+) GB write", t, re.M)
    wal = re.findall(r"^Cumulative WAL: .* written: ([\d.]+) GB", t, re.M)
    return {"compaction_incl_flush": float(comp[-1]) * GIB if comp else None,
            "wal": float(wal[-1]) * GIB if wal else None}


def bench_line(path, name):
    """db_bench's result line of benchmark NAME -> (ops/s, seconds)."""
    m = re.search(rf"^{name}\s*:\s*([\d.]+) micros/op (\d+) ops/sec ([\d.]+) seconds", read(path) or "", re.M)
    return (int(m.group(2)), float(m.group(3))) if m else (None, None)


def blkzone(path):
    """`blkzone report` -> [(type 'conv'|'seq', start, len, cap, wp)] in sectors,
    wp relative to the zone's start."""
    zones = []
    for m in re.finditer(r"start: (0x[0-9a-f]+), len (0x[0-9a-f]+), cap (0x[0-9a-f]+), wptr (0x[0-9a-f]+)"
                         r".*?\[type: \d+\((\w+)", read(path) or ""):
        kind = "conv" if m.group(5).upper().startswith("CONV") else "seq"
        zones.append((kind, int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16)))
    return zones


def f2fs_status(path):
    """debugfs f2fs/status -> a few counters."""
    t = read(path) or ""
    out = {}
    for key, rx in (("valid_blocks", r"Utilization: \d+% \((\d+) valid blocks"),
                    ("gc_calls", r"GC calls: (\d+)"), ("gc_bg_calls", r"GC calls: \d+ \(BG: (\d+)\)"),
                    ("gc_data_segs", r"- data segments : (\d+)"), ("gc_node_segs", r"- node segments : (\d+)"),
                    ("gc_moved_blocks", r"Try to move (\d+) blocks"), ("cp_calls", r"CP calls: (\d+)"),
                    ("main_secs", r"Main area: \d+ segs, (\d+) secs"),
                    ("ovp_segs", r"OverProv:(\d+)"), ("resv_segs", r"Resv:(\d+)")):
        m = re.search(rx, t)
        if m:
            out[key] = int(m.group(1))
    return out


class Run:
    """One device at one zone size."""

    def __init__(self, base, kind, zone_mb, name, status, meta, fs="f2fs"):
        self.kind, self.zone_mb, self.status, self.fs = kind, int(zone_mb), status, fs
        # plots and tables: one series per device and file system
        self.key = kind if fs == "f2fs" else f"{kind}-{fs}"
        self.label = LABEL.get(kind, kind) + ("" if fs == "f2fs" else f", {FS_LABEL.get(fs, fs)}")
        d = os.path.join(base, name)
        self.dir = d
        self.times = {k: float(v) for k, v in kv_file(os.path.join(d, "times.txt")).items()}
        self.stat = {t: disk_stat(os.path.join(d, f"{t}.stat")) for t in ("created", "mounted", "loaded", "end", "umounted")}
        self.stats = {t: read_json(os.path.join(d, f"{t}.stats.json")) for t in ("created", "mounted", "loaded", "end", "umounted")}
        self.f2fs = {t: kv_file(os.path.join(d, f"{t}.f2fs")) for t in ("mounted", "loaded", "end")}
        self.status_end = f2fs_status(os.path.join(d, "end.f2fs-status"))
        mk = read(os.path.join(d, "mkfs.txt")) or ""
        m = re.search(r"Overprovision ratio = ([\d.]+)%", mk)
        self.mkfs_ovp = float(m.group(1)) if m else None
        ks = int(meta.get("key_size", 16)) + int(meta.get("value", 1000))
        self.t_load = tickers(os.path.join(d, "load.txt"))
        self.t_mix = tickers(os.path.join(d, "mix.txt"))
        self.load_ops, _ = bench_line(os.path.join(d, "load.txt"), meta.get("fill", "fillrandom"))
        self.mix_ops, _ = bench_line(os.path.join(d, "mix.txt"), "readrandomwriterandom")
        self.ok = status == "ok"
        self.phase = {}
        for ph, t in (("load", self.t_load), ("mix", self.t_mix)):
            user = t.get("number.keys.written", 0) * ks
            wal, flush, comp = t.get("wal.bytes", 0), t.get("flush.write.bytes", 0), t.get("compact.write.bytes", 0)
            self.phase[ph] = {"user": user, "wal": wal, "flush": flush, "compact": comp, "rocks": wal + flush + comp,
                              "db_stats": db_stats(os.path.join(d, f"{ph}.txt"))}
        self.user = sum(p["user"] for p in self.phase.values())
        self.wal = sum(p["wal"] for p in self.phase.values())
        self.flush = sum(p["flush"] for p in self.phase.values())
        self.compact = sum(p["compact"] for p in self.phase.values())
        self.rocks = self.wal + self.flush + self.compact
        # device bytes: the kernel's count, and BIUS's own when it has one
        self.dev_sys = self.delta_sys("mounted", "end")
        self.phase_dev = {"load": self.delta_sys("mounted", "loaded"), "mix": self.delta_sys("loaded", "end")}
        self.mkfs_dev = self.delta_sys("created", "mounted")
        self.dev_own = self.delta_own("mounted", "end")
        self.dev = self.dev_own if self.dev_own is not None else self.dev_sys
        self.agree = self.cross_check()
        lw = [self.f2fs[t].get("lifetime_write_kbytes") for t in ("mounted", "end")]
        self.f2fs_lifetime = (int(lw[1]) - int(lw[0])) * 1024 if all(lw) else None
        self.live = int((read(os.path.join(d, "end.du")) or "0").strip() or 0)
        m = re.search(r"--size (\d+)M|size=(\d+) ", read(os.path.join(d, "args.txt")) or "")
        self.dev_mb = int(m.group(1) or m.group(2)) if m else None
        # df -B1 right after mount: the space F2FS gives files, and what is free
        df = [ln.split() for ln in (read(os.path.join(d, "df.txt")) or "").splitlines() if ln.startswith("/dev/")]
        self.fs_size = int(df[0][3]) if df else None
        self.fs_used_end = int(df[-1][3]) if len(df) > 1 else None
        # zenfs df: "Free: N MB", "Used: N MB", "Reclaimable: N MB" after mkfs and at the end
        zdf = {k: [int(v) * MIB for v in re.findall(rf"^{k}: (\d+) MB", read(os.path.join(d, "df.txt")) or "", re.M)]
               for k in ("Free", "Used", "Reclaimable")}
        self.zenfs_df = {k.lower(): v[-1] for k, v in zdf.items() if len(v) > 1} or None
        if fs == "zenfs" and zdf["Free"]:
            self.fs_size = zdf["Free"][0]
            self.fs_used_end = zdf["Free"][-1] if len(zdf["Free"]) > 1 else None
        self.zones()

    def delta_sys(self, a, b):
        sa, sb = self.stat.get(a), self.stat.get(b)
        return (sb["write_sectors"] - sa["write_sectors"]) * SECTOR if sa and sb else None

    def delta_own(self, a, b):
        ja, jb = self.stats.get(a), self.stats.get(b)
        if not ja or not jb:
            return None
        return sum(jb["ops"][op]["bytes"] - ja["ops"][op]["bytes"] for op in ("write", "zone_append"))

    def cross_check(self):
        """BIUS's own counters against `/sys/block/<disk>/stat` at each point
        both were read: None without `biusctl stats`, else a list of
        mismatches (empty: they agree exactly)."""
        bad, seen = [], 0
        for t, j in self.stats.items():
            s = self.stat.get(t)
            if not j or not s:
                continue
            seen += 1
            k = j.get("kernel", {})
            for key in ("read_ios", "read_sectors", "write_ios", "write_sectors", "discard_ios", "discard_sectors",
                        "flush_ios"):
                if key in k and k[key] != s[key]:
                    bad.append(f"{t}: {key} stats {k[key]} != /sys/block {s[key]}")
            own = j["ops"]["write"]["bytes"] + j["ops"]["zone_append"]["bytes"]
            if own != s["write_sectors"] * SECTOR:
                bad.append(f"{t}: write+append bytes {own} != /sys/block write sectors x 512 {s['write_sectors'] * SECTOR}")
        return bad if seen else None

    def zones(self):
        """Fill of every sequential zone at the end: from BIUS's per_zone
        when it has them, else from blkzone report."""
        self.fill_src = "blkzone report"
        fills, self.conv_bytes, held = [], 0, 0
        j = self.stats.get("end")
        z = (j or {}).get("zoned") or {}
        if z.get("per_zone"):
            self.fill_src = "biusctl stats --zones"
            cap, nconv = z["zone_capacity"], z.get("conventional_zones", 0)
            for pz in z["per_zone"]:
                if pz.get("index", nconv) < nconv or pz.get("condition") == "not_write_pointer" \
                        or pz.get("type", "seq") not in ("seq", "sequential"):
                    self.conv_bytes += z["zone_bytes"]
                    continue
                fills.append((pz["write_pointer"], cap))
        report, conv = [], 0
        for kind, _start, length, cap, wp in blkzone(os.path.join(self.dir, "end.zones.txt")):
            if kind == "conv":
                conv += length * SECTOR
            else:
                report.append((wp * SECTOR, cap * SECTOR))
        # BIUS's zones against the kernel's report of the same moment (a
        # full zone's write pointer is the device's choice: capped here)
        self.zones_agree = None
        if fills:
            self.zones_agree = [(min(w, c), c) for w, c in fills] == [(min(w, c), c) for w, c in report]
        else:
            fills, self.conv_bytes = report, conv
        self.seq_zones = len(fills)
        self.empty_zones = sum(1 for wp, _ in fills if wp == 0)
        self.hist = [0] * 10  # non-empty zones by fill
        for wp, cap in fills:
            if wp:
                self.hist[min(9, wp * 10 // cap)] += 1
                held += cap
        self.held = held
        self.written_now = sum(wp for wp, _ in fills)
        self.held_own = z.get("held_bytes") if z else None
        self.fill_now_own = z.get("fill_now") if z else None
        # (BIUS's fill_now: the non-empty zones, as hist)
        self.fill_now = self.hist

    def ratio(self, a, b):
        return a / b if a is not None and b else None

    def summary(self):
        return {"device": self.kind, "fs": self.fs, "zone_mb": self.zone_mb, "status": self.status, "times_s": self.times,
                "user_bytes": self.user, "rocksdb_bytes": self.rocks, "wal_bytes": self.wal,
                "flush_bytes": self.flush, "compaction_bytes": self.compact, "device_bytes": self.dev,
                "device_bytes_sysfs": self.dev_sys, "device_bytes_biusctl": self.dev_own,
                "bius_vs_sysfs_mismatches": self.agree, "mkfs_mount_bytes": self.mkfs_dev,
                "phase": self.phase, "phase_device_bytes": self.phase_dev,
                "f2fs_lifetime_write_bytes": self.f2fs_lifetime, "f2fs_status": self.status_end,
                "mkfs_overprovision_pct": self.mkfs_ovp, "device_mb": self.dev_mb, "f2fs_avail_mount_bytes": self.fs_size,
                "f2fs_avail_end_bytes": self.fs_used_end,
                "zenfs_df_end_bytes": self.zenfs_df,
                "rocksdb_wa": self.ratio(self.rocks, self.user), "f2fs_wa": self.ratio(self.dev, self.rocks),
                "fs_wa": self.ratio(self.dev, self.rocks),
                "total_wa": self.ratio(self.dev, self.user), "live_bytes": self.live,
                "held_bytes": self.held, "held_bytes_biusctl": self.held_own, "written_bytes_now": self.written_now,
                "space_amp": self.ratio(self.held, self.live), "seq_zones": self.seq_zones,
                "empty_zones": self.empty_zones, "fill_hist_nonempty": self.hist, "fill_source": self.fill_src,
                "fill_now_biusctl": self.fill_now_own, "zones_biusctl_equal_blkzone": self.zones_agree, "load_ops_s": self.load_ops, "mix_ops_s": self.mix_ops}


def gib(v):
    return "–" if v is None else f"{v / GIB:.2f}"


def x(v, nd=2):
    return "–" if v is None else f"{v:.{nd}f}"


def markdown(runs, meta, build, res):
    zones = meta.get("zones_mb", "")
    fss = sorted({r.fs for r in runs})
    fsw = " and ".join(FS_LABEL.get(f, f) for f in fss)
    lines = [f"# Zone-size study: RocksDB on {fsw} on zoned disks", ""]
    tools = [meta.get(k) for k, f in (("db_bench", "f2fs"), ("mkfs.f2fs", "f2fs"), ("db_bench_zenfs", "zenfs"),
                                      ("zenfs", "zenfs")) if f in fss and meta.get(k)]
    lines.append(f"Build: {build.get('main', '?')}; VM: {meta.get('cpus', '?')} vCPUs, "
                 f"{int(meta.get('mem_kb', 0)) // 1024} MiB; {'; '.join(tools)}.")
    dev_mb, conv = int(meta.get("dev_mb", 0)), int(meta.get("conv_zones", 0))
    sizes = {r.zone_mb: r.dev_mb for r in runs if r.fs == "f2fs"}
    zsizes = {r.zone_mb: r.dev_mb for r in runs if r.fs == "zenfs"}
    keys, ops = int(meta.get("keys", 0)), int(meta.get("ops", 0))
    ks = int(meta.get("key_size", 16)) + int(meta.get("value", 1000))
    rs = int(meta.get("rocks_scale", 1))
    if dev_mb:
        what = f"Device {dev_mb} MiB for every zone size"
    else:
        what = (f"Devices sized so that F2FS (mkfs.f2fs -o {meta.get('ovp')}) has {meta.get('space_mb')} MiB "
                "of sequential zones beyond the sections it reserves for its cleaner (28, whatever their size) "
                "at every zone size")
    scale = []
    if sizes:
        scale.append(f"{what} (the first {conv} zones conventional, for F2FS's superblock and metadata), zone sizes "
                     + ", ".join(f"{z} MiB ({sizes[int(z)]} MiB, {sizes[int(z)] // int(z)} zones)"
                                 for z in zones.split() if sizes.get(int(z))) + ".")
    if zsizes:
        scale.append("ZenFS (`zenfs mkfs` on the raw disk, RocksDB 9.10.0's db_bench with ZenFS, "
                     "`--fs_uri=zenfs://dev:<disk>`): no conventional zones (ZenFS uses only sequential ones), "
                     + (f"{dev_mb} MiB" if dev_mb else f"{meta.get('space_mb')} MiB plus ZenFS's 3 metadata zones, "
                        "at least 32 zones (ZenFS's minimum)") + ", zone sizes "
                     + ", ".join(f"{z} MiB ({zsizes[int(z)]} MiB, {zsizes[int(z)] // int(z)} zones)"
                                 for z in zones.split() if zsizes.get(int(z))) + ".")
    lines += ["", "**Scale.** " + " ".join(scale)
              + f" RocksDB: `{meta.get('fill', 'fillrandom')}` of {keys} keys of {meta.get('key_size')} + "
              f"{meta.get('value')} B ({keys * ks / GIB:.2f} GiB), `bytes_per_sync` and `wal_bytes_per_sync` "
              f"{meta.get('sync_kb', '?')} KiB, then `readrandomwriterandom "
              f"--readwritepercent=50` of {ops} operations (YCSB-A-like), no compression; its memtable, SST file "
              f"and level-1 sizes are the defaults / {rs} ({64 // rs}, {64 // rs}, {256 // rs} MiB), so the LSM tree "
              f"has the shape of a {keys * ks * rs / GIB:.1f} GiB data set at RocksDB's defaults. "
              f"Zone sizes are not scaled.", ""]
    lines += ["## Writes and write amplification", "",
              "From the end of mkfs + mount to the end of the mix (each phase ends with waitforcompaction and sync). "
              "*user*: keys + values put; *RocksDB*: WAL + flush + compaction bytes; *device*: bytes the file system wrote to "
              "the disk; *RocksDB WA* = RocksDB / user, *FS WA* (F2FS's or ZenFS's) = device / RocksDB, *total* = "
              "device / user; *GC*: F2FS's GC calls (background) and blocks moved; *space amp.* = capacity of the "
              "non-empty sequential zones / live data (the database's files: `du --apparent-size`, for ZenFS "
              "the sizes `zenfs list` gives); free GiB: `df`, for ZenFS `zenfs df`.", "",
              "| zone | device, fs | user GiB | RocksDB GiB (WAL / flush / compaction) | device GiB | RocksDB WA | FS WA "
              "| total WA | F2FS GC calls (BG) / blocks moved | FS free GiB: after mount / at the end "
              "| non-empty zones / seq. zones | held GiB | live GiB "
              "| space amp. | load ops/s | mix ops/s | minutes |",
              "|---:|---|---:|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        s = r.status_end
        gc = f"{s.get('gc_calls', '–')} ({s.get('gc_bg_calls', '–')}) / {s.get('gc_moved_blocks', '–')}"
        gc = gc if r.fs == "f2fs" else "–"
        note = "" if r.ok else f" ({r.status} failed)"
        lines.append(f"| {r.zone_mb} MiB | {r.label}{note} | {gib(r.user)} | {gib(r.rocks)} "
                     f"({gib(r.wal)} / {gib(r.flush)} / {gib(r.compact)}) | {gib(r.dev)} | "
                     f"{x(r.ratio(r.rocks, r.user))} | {x(r.ratio(r.dev, r.rocks))} | {x(r.ratio(r.dev, r.user))} | "
                     f"{gc} | {gib(r.fs_size)} / {gib(r.fs_used_end)} | {r.seq_zones - r.empty_zones} / {r.seq_zones} | {gib(r.held)} | {gib(r.live)} | "
                     f"{x(r.ratio(r.held, r.live))} | {r.load_ops or '–'} | {r.mix_ops or '–'} | "
                     f"{x(r.times.get('total', 0) / 60, 1)} |")
    lines += ["", "Per phase (device bytes from `/sys/block/<disk>/stat`; F2FS's own count of what it wrote, "
              "`/sys/fs/f2fs/<disk>/lifetime_write_kbytes`, over both; mkfs.f2fs's overprovision ratio):", "",
              "| zone | device, fs | load: user / RocksDB / device GiB | mix: user / RocksDB / device GiB "
              "| F2FS lifetime_write GiB | mkfs + mount GiB | overprovision |",
              "|---:|---|---|---|---:|---:|---:|"]
    for r in runs:
        pl, pm = r.phase["load"], r.phase["mix"]
        lines.append(f"| {r.zone_mb} MiB | {r.label} | {gib(pl['user'])} / {gib(pl['rocks'])} / "
                     f"{gib(r.phase_dev['load'])} | {gib(pm['user'])} / {gib(pm['rocks'])} / {gib(r.phase_dev['mix'])} "
                     f"| {gib(r.f2fs_lifetime)} | {gib(r.mkfs_dev)} | "
                     f"{'–' if r.mkfs_ovp is None else f'{r.mkfs_ovp:g}%'} |")
    lines += ["", "## Zones by fill at the end", "",
              "Non-empty sequential zones by write pointer / capacity (10% buckets; a full zone is in the last); "
              "source: `blkzone report`, or for BIUS `biusctl stats --json --zones` when this biusctl has it.", "",
              "| zone | device, fs | empty | " + " | ".join(BUCKETS) + " | source |",
              "|---:|---|---:|" + "---:|" * 10 + "---|"]
    for r in runs:
        lines.append(f"| {r.zone_mb} MiB | {r.label} | {r.empty_zones} | "
                     + " | ".join(str(v) for v in r.hist) + f" | {r.fill_src} |")
    lines += ["", "## BIUS's own counters against the kernel's", ""]
    bius = [r for r in runs if r.kind == "bius"]
    if not any(r.agree is not None for r in bius):
        lines.append("This biusctl has no `biusctl stats`: the BIUS rows use `/sys/block/<disk>/stat` and "
                     "`blkzone report`.")
    else:
        lines += ["`biusctl stats --json` at every point the kernel's `/sys/block/<disk>/stat` was read (created, "
                  "mounted, loaded, end, unmounted): its `kernel` block field by field, and its write + zone "
                  "append bytes against the write sectors × 512; and its held bytes and fill against the zone "
                  "report.", "",
                  "| zone | fs | device bytes, biusctl | device bytes, /sys/block | agree | held bytes, biusctl / from its "
                  "zones | fill_now = its zones | its zones = blkzone report |",
                  "|---:|---|---:|---:|---|---|---|---|"]
        for r in bius:
            agree = "–" if r.agree is None else ("exactly" if not r.agree else "NO: " + "; ".join(r.agree[:3]))
            fill = "–" if r.fill_now_own is None else ("yes" if r.fill_now_own == r.fill_now else
                                                      f"NO: {r.fill_now_own} vs {r.fill_now}")
            lines.append(f"| {r.zone_mb} MiB | {FS_LABEL.get(r.fs, r.fs)} | {r.dev_own} | {r.dev_sys} | {agree} | {r.held_own} / {r.held} "
                         f"| {fill} | {'–' if r.zones_agree is None else ('yes' if r.zones_agree else 'NO')} |")
    lines += ["", "## BIUS against null_blk", "",
              "Same geometry, same workload, same boot; RocksDB's background work is not deterministic, so the "
              "device totals differ from run to run on either disk.", "",
              "| zone | fs | device GiB BIUS / null_blk | ratio | FS WA BIUS / null_blk | space amp. BIUS / null_blk |",
              "|---:|---|---|---:|---|---|"]
    by = {(r.kind, r.fs, r.zone_mb): r for r in runs}
    for f, z in sorted({(r.fs, r.zone_mb) for r in runs}):
        b, n = by.get(("bius", f, z)), by.get(("nullb", f, z))
        if b and n:
            lines.append(f"| {z} MiB | {FS_LABEL.get(f, f)} | {gib(b.dev)} / {gib(n.dev)} | {x(b.ratio(b.dev, n.dev), 3)} | "
                         f"{x(b.ratio(b.dev, b.rocks))} / {x(n.ratio(n.dev, n.rocks))} | "
                         f"{x(b.ratio(b.held, b.live))} / {x(n.ratio(n.held, n.live))} |")
    lines += ["", f"VM time: {build.get('vm_seconds', '?')} s. Figures: zone-size-writes.png (6), "
              "zone-size-f2fs-wa.png (7, F2FS's or ZenFS's), zone-size-fill.png (8), zone-size-space-amp.png (9).", ""]
    return "\n".join(lines)


def write_dat(path, rows):
    with open(path, "w") as fh:
        for r in rows:
            fh.write(" ".join(str(v) for v in r) + "\n")


def plots(runs, res):
    dd = os.path.join(res, "zone-size-data")
    os.makedirs(dd, exist_ok=True)
    kinds = list(dict.fromkeys(r.key for r in sorted(runs, key=lambda r: (r.fs, r.kind))))
    label = {r.key: r.label for r in runs}
    # 6: device writes split: user data, RocksDB's extra, F2FS's extra
    rows = []
    for r in runs:
        if r.dev is None:
            continue
        rows.append((f'"{r.zone_mb}M-{r.label.replace(", ", "-")}"', r.user / GIB, max(0, r.rocks - r.user) / GIB,
                     max(0, r.dev - r.rocks) / GIB))
    write_dat(os.path.join(dd, "writes.dat"), rows)
    term = "set terminal pngcairo size 900,560 font 'sans,10' noenhanced"
    gp = [term, "set output 'zone-size-writes.png'",
          "set title 'Total device writes by source, per zone size'", "set style data histograms",
          "set style histogram rowstacked", "set style fill solid 0.8 border -1", "set boxwidth 0.7",
          "set ylabel 'GiB written to the device'", "set key outside bottom center horizontal", "set grid ytics", "set yrange [0:*]",
          "set xtics rotate by -30",
          "plot 'zone-size-data/writes.dat' u 2:xtic(1) t 'user data', '' u 3 t 'RocksDB write amplification', "
          f"'' u 4 t '{' / '.join(sorted({FS_LABEL.get(r.fs, r.fs) for r in runs}))} write amplification'", "set xtics norotate", "set key inside left top"]
    # 7 and 9: F2FS WA and space amplification by zone size, one line per device
    for k in kinds:
        write_dat(os.path.join(dd, f"wa-{k}.dat"),
                  [(r.zone_mb, x(r.ratio(r.dev, r.rocks), 4), x(r.ratio(r.held, r.live), 4),
                    x(r.ratio(r.rocks, r.user), 4)) for r in runs if r.key == k and r.dev is not None])
    fsw = " / ".join(sorted({FS_LABEL.get(r.fs, r.fs) for r in runs}))
    for out, col, title, yl in (("zone-size-f2fs-wa.png", 2, f"{fsw} write amplification by zone size",
                                 "device bytes / RocksDB bytes"),
                                ("zone-size-space-amp.png", 3, "Space amplification by zone size",
                                 "held (non-empty zones) / live data")):
        gp += [term, f"set output '{out}'", f"set title '{title}'", "set logscale x 2", "set xrange [48:340]", "set xtics (64, 128, 256)",
               "set xlabel 'zone size, MiB'", f"set ylabel '{yl}'", "set yrange [0:*]", "set key left top",
               "set grid", "plot " + ", ".join(f"'zone-size-data/wa-{k}.dat' u 1:{col} w lp pt 7 lw 2 "
                                               f"t '{label[k]}'" for k in kinds), "unset logscale", "unset xlabel", "set xrange [*:*]",
               "set xtics autofreq"]
    # 8: zones by fill, one cluster of zone sizes per bucket, a panel per device
    gp += ["set terminal pngcairo size 1200,520 font 'sans,10' noenhanced", "set output 'zone-size-fill.png'",
           f"set multiplot layout 1,{len(kinds)} title 'Non-empty zones by fill at the end'",
           "set style data histograms", "set style histogram clustered gap 1", "set style fill solid 0.8 border -1",
           "set xlabel 'fill (write pointer / capacity)'", "set ylabel 'zones'", "set yrange [0:*]",
           "set xtics rotate by -45", "set key right top opaque box", "set offsets 0, 0, graph 0.15, 0"]
    for k in kinds:
        rs = [r for r in runs if r.key == k]
        write_dat(os.path.join(dd, f"fill-{k}.dat"), [(f'"{b}"', *[r.hist[i] for r in rs]) for i, b in enumerate(BUCKETS)])
        parts = [f"'zone-size-data/fill-{k}.dat' u {i + 2}{':xtic(1)' if i == 0 else ''} t '{r.zone_mb} MiB zones'"
                 for i, r in enumerate(rs)]
        gp += [f"set title '{label[k]}'", "plot " + ", ".join(parts)]
    gp.append("unset multiplot")
    with open(os.path.join(res, "zone-size.gp"), "w") as fh:
        fh.write("\n".join(gp) + "\n")


def main():
    res = sys.argv[1]
    base = os.path.join(res, "zs")
    meta = kv_file(os.path.join(base, "meta.txt"))
    build = kv_file(os.path.join(res, "build.txt"))
    runs = []
    for line in (read(os.path.join(base, "runs.txt")) or "").splitlines():
        f = line.split()
        if len(f) in (4, 5) and f[3] not in ("nodev", "mkfs", "mount"):
            runs.append(Run(base, f[0], f[1], f[2], f[3], meta, *f[4:]))
    if not runs:
        sys.exit("report_zone_size: no run got as far as the load")
    runs.sort(key=lambda r: (r.fs, r.zone_mb, r.kind))
    plots(runs, res)
    with open(os.path.join(res, "zone-size.md"), "w") as fh:
        fh.write(markdown(runs, meta, build, res))
    with open(os.path.join(res, "zone-size.json"), "w") as fh:
        json.dump({"meta": meta, "runs": [r.summary() for r in runs]}, fh, indent=1)
    bad = [r for r in runs if r.agree]
    print(f"report_zone_size: {len(runs)} runs: {os.path.join(res, 'zone-size.md')}"
          + (f"; BIUS's counters DISAGREE with /sys/block in {len(bad)} runs" if bad else ""))


if __name__ == "__main__":
    main()
