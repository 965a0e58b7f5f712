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
def ublk_peer(device):
    """The ublk device a device is compared with: its null target for the
    devices without storage (bius-null moves no data, as it does;
    bius-zero moves it), the RAM server for the others."""
    storage_free = ("null" in device and device != "null_blk") or device == "bius-zero"
    return "ublk-null" if storage_free else "ublk-ram"
