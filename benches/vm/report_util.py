"""Reading the guest's result files, formatting quantities and pairing
devices, for the benchmark reports (report.py and the report_*.py)."""

import json


def read_json(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def read_log(path):
    """fio log: [(time s, value)]."""
    rows = []
    try:
        with open(path) as fh:
            for line in fh:
                parts = [x.strip() for x in line.split(",")]
                if len(parts) >= 2:
                    rows.append((int(parts[0]) / 1000.0, float(parts[1])))
    except OSError:
        pass
    return rows


# --- formatting -------------------------------------------------------------
def fmt(v, digits=None):
    if v is None:
        return "–"
    if digits is None:
        digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
    return f"{v:.{digits}f}"


def cell(s, scale=1.0):
    """median [min–max] of a stats dict, or –."""
    if not s:
        return "–"
    return f"{fmt(s['median'] * scale)} [{fmt(s['min'] * scale)}–{fmt(s['max'] * scale)}]"


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt_time(s):
    if s is None:
        return "–"
    for unit, mult in (("s", 1), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if abs(s) >= mult or unit == "ns":
            return f"{s / mult:.3g} {unit}"
    return "–"


def fmt_num(v, unit=""):
    if v is None:
        return "–"
    for suffix, mult in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= mult:
            return f"{v / mult:.3g} {suffix}{unit}"
    return f"{v:.3g} {unit}".strip()


def fmt_bw(v):
    return fmt_num(v, "B/s")


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


# --- pairing ----------------------------------------------------------------
# devices that keep no data and whose kernel moves none (BIUS's null
# backend, null_blk without memory), and those that keep none but move it
# as a device with storage does (BIUS's zero backend; rublk's null target,
# whose kernel copies each request to or from the server's buffer)
NO_DATA = ("bius-null", "bius-null-nostats", "bius-null-poll0", "bius-null-inherit", "null_blk-nodata",
           "ublk-null-nodata", "ublk-null-nodata-batch")
NO_STORAGE = ("bius-zero", "ublk-null", "ublk-null-batch")


def ublk_peer(device):
    """The ublk device a device is compared with, the one doing the same
    work: rublk's null target with user copy (ublk-null-nodata: nothing
    moves) for the devices without data, its null target (the data moves)
    for those without storage, the RAM server for the others."""
    if device in NO_DATA:
        return "ublk-null-nodata"
    return "ublk-null" if device in NO_STORAGE else "ublk-ram"
