#!/usr/bin/env python3
"""Plots of BIUS statistics and request traces (PNG, matplotlib's Agg).

    biusplot.py lba TRACE -o PNG [--ops write,zone_append,...] [--title T]
    biusplot.py latency TRACE... -o PNG [--ops ...] [--label L ...] [--title T]
    biusplot.py fill STATS_JSON... -o PNG [--which now|reset|finish] [--label L ...] [--title T]
    biusplot.py ops STATS_JSON -o PNG [--title T]

TRACE is a file of `biusctl trace NAME -o FILE`, binary (recognised by its
magic) or CSV (by its header line); STATS_JSON the output of `biusctl stats
NAME --json` ('-': standard input).  The formats are described in
benches/README.md (*Plots of statistics and traces*).

Bad input (a missing file, a wrong magic or version, a malformed CSV line,
an empty trace, ...) ends with a one-line message starting `biusplot: ` on
stderr and exit status 2.

Other scripts can import the readers:

    from biusplot import read_trace, read_stats, OPS
    recs = read_trace("run.trc")        # numpy structured array, sorted by time_ns
    writes = recs[recs["op"] == OPS.index("write")]
"""

import argparse
import json
import os
import sys

try:
    import numpy as np
except ImportError:
    if __name__ != "__main__":
        raise
    sys.exit("biusplot: numpy is missing: apt-get install python3-matplotlib (it brings numpy), "
             "or run Debian's /usr/bin/python3")

# Op names in the order of their binary codes (index = code).
OPS = ("read", "write", "flush", "discard", "write_zeroes", "report_zones", "zone_open",
       "zone_close", "zone_finish", "zone_reset", "zone_reset_all", "zone_append")
OP_CODES = {name: code for code, name in enumerate(OPS)}

MAGIC = b"BIUSTRC1"
VERSION = 1
HEADER_SIZE = 32
RECORD_SIZE = 40
CSV_HEADER = "time_ns,queue,op,offset,len,latency_ns,result"

# One trace record.  The binary record's layout: its reserved fields (a u8
# at 31 and a u32 at 36) are left out of the names but kept in the size, so
# numpy reads the file as is.
RECORD_DTYPE = np.dtype({
    "names": ["time_ns", "offset", "latency_ns", "len", "queue", "op", "result"],
    "formats": ["<u8", "<u8", "<u8", "<u4", "<u2", "u1", "<i4"],
    "offsets": [0, 8, 16, 24, 28, 30, 32],
    "itemsize": RECORD_SIZE,
})

# The CSV columns in their order, as (field of RECORD_DTYPE, smallest, largest value).
CSV_COLUMNS = [(name, int(np.iinfo(RECORD_DTYPE[name]).min), int(np.iinfo(RECORD_DTYPE[name]).max))
               for name in CSV_HEADER.split(",")]

FILL_KEYS = {"now": "fill_now", "reset": "fill_at_reset", "finish": "fill_at_finish"}

# How each op looks in the plots: colour, and for zone operations in `lba`
# the marker drawn at the zone's offset (the other ops: a dot per request).
OP_COLOURS = {
    "read": "tab:gray", "write": "tab:blue", "flush": "tab:olive", "discard": "tab:purple",
    "write_zeroes": "tab:brown", "report_zones": "tab:pink", "zone_open": "tab:cyan",
    "zone_close": "darkcyan", "zone_finish": "black", "zone_reset": "tab:red",
    "zone_reset_all": "darkred", "zone_append": "tab:green",
}
ZONE_MARKERS = {"zone_reset": "x", "zone_finish": ">", "zone_open": "^", "zone_close": "v",
                "report_zones": "+"}
# Ops without an offset: `lba` draws zone_reset_all as a vertical line and
# cannot place a flush.
LBA_UNPLACEABLE = ("flush",)
LINE_STYLES = ("-", "--", ":", "-.")


class BiusplotError(Exception):
    """Bad input: main() prints `biusplot: MESSAGE` and exits with status 2."""


# --- readers ---------------------------------------------------------------
def read_trace(path):
    """The records of a trace file, binary or CSV, sorted by time_ns.

    Returns a numpy structured array of RECORD_DTYPE (fields time_ns,
    offset, latency_ns, len, queue, op, result; op is the code, an index
    into OPS).  Raises BiusplotError on bad input, an empty trace included.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC))
    except OSError as e:
        raise BiusplotError(f"{path}: {e.strerror}") from None
    if head == MAGIC:
        recs = _read_binary(path)
    elif head == CSV_HEADER.encode()[:len(MAGIC)]:
        recs = _read_csv(path)
    else:
        raise BiusplotError(f"{path}: not a BIUS trace (neither the binary magic "
                            f"{MAGIC.decode()} nor the CSV header '{CSV_HEADER}')")
    if len(recs) == 0:
        raise BiusplotError(f"{path}: the trace holds no records")
    return recs[np.argsort(recs["time_ns"], kind="stable")]


def _read_binary(path):
    """The records of a binary trace, in file order (header checked)."""
    with open(path, "rb") as f:
        header = f.read(HEADER_SIZE)
    if len(header) < HEADER_SIZE:
        raise BiusplotError(f"{path}: binary trace header cut short ({len(header)} of {HEADER_SIZE} bytes)")
    version = int.from_bytes(header[8:12], "little")
    record_size = int.from_bytes(header[12:16], "little")
    if version != VERSION:
        raise BiusplotError(f"{path}: binary trace version {version}, biusplot reads version {VERSION}")
    if record_size != RECORD_SIZE:
        raise BiusplotError(f"{path}: binary trace record size {record_size}, version {VERSION} has {RECORD_SIZE}")
    count, tail = divmod(os.path.getsize(path) - HEADER_SIZE, RECORD_SIZE)
    if tail:
        print(f"biusplot: warning: {path}: the last {tail} bytes are not a whole record "
              "(a trace still being written?): ignored", file=sys.stderr)
    recs = np.fromfile(path, dtype=RECORD_DTYPE, count=count, offset=HEADER_SIZE)
    bad = np.flatnonzero(recs["op"] >= len(OPS))
    if len(bad):
        raise BiusplotError(f"{path}: record {bad[0]} has op code {recs['op'][bad[0]]}, "
                            f"the last known is {len(OPS) - 1}")
    return recs


def _read_csv(path):
    """The records of a CSV trace, in file order (every line checked)."""
    columns = [[] for _ in CSV_COLUMNS]
    with open(path, encoding="utf-8", errors="replace") as f:
        header = f.readline().strip()
        if header != CSV_HEADER:
            raise BiusplotError(f"{path}:1: CSV header '{header}', expected '{CSV_HEADER}'")
        for lineno, line in enumerate(f, start=2):
            line = line.strip()
            if not line:
                continue
            fields = line.split(",")
            if len(fields) != len(CSV_COLUMNS):
                raise BiusplotError(f"{path}:{lineno}: {len(fields)} fields, expected "
                                    f"{len(CSV_COLUMNS)} ({CSV_HEADER}): '{line}'")
            for column, text, (name, lo, hi) in zip(columns, fields, CSV_COLUMNS):
                if name == "op":
                    value = OP_CODES.get(text)
                    if value is None:
                        raise BiusplotError(f"{path}:{lineno}: unknown op '{text}'")
                else:
                    try:
                        value = int(text)
                    except ValueError:
                        raise BiusplotError(f"{path}:{lineno}: {name} '{text}' is not an integer") from None
                    if not lo <= value <= hi:
                        raise BiusplotError(f"{path}:{lineno}: {name} {value} out of range {lo}..{hi}")
                column.append(value)
    recs = np.zeros(len(columns[0]), dtype=RECORD_DTYPE)
    for column, (name, _, _) in zip(columns, CSV_COLUMNS):
        recs[name] = column
    return recs


def read_stats(path):
    """The object of a `biusctl stats NAME --json` file ('-': stdin), as a dict.

    Checks that it has an "ops" object; raises BiusplotError otherwise.
    """
    try:
        if path == "-":
            stats = json.load(sys.stdin)
        else:
            with open(path, encoding="utf-8") as f:
                stats = json.load(f)
    except OSError as e:
        raise BiusplotError(f"{path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise BiusplotError(f"{path}:{e.lineno}: not JSON: {e.msg}") from None
    if not isinstance(stats, dict) or not isinstance(stats.get("ops"), dict):
        raise BiusplotError(f"{path}: not the output of 'biusctl stats --json' (no \"ops\" object)")
    return stats


def fill_histogram(stats, which, path="stats"):
    """(bucket labels, counts) of a stats object's zone fill histogram.

    which: "now" (every sequential zone now), "reset" (zones at their
    resets) or "finish" (at their finishes).  path names the file in errors.
    """
    zoned = stats.get("zoned")
    if not isinstance(zoned, dict):
        raise BiusplotError(f"{path}: device {stats.get('device', '?')} is not zoned: no zone fill histogram")
    labels, counts = zoned.get("fill_buckets"), zoned.get(FILL_KEYS[which])
    if not isinstance(labels, list) or not isinstance(counts, list) or len(labels) != len(counts) \
            or not all(isinstance(c, int) for c in counts):
        raise BiusplotError(f"{path}: \"zoned\" lacks fill_buckets and a matching {FILL_KEYS[which]} of counts")
    return labels, counts


def op_stats(stats, path="stats"):
    """{op: its entry of stats["ops"]} for the ops with a count > 0, in OPS order."""
    used = {}
    for op in OPS:
        entry = stats["ops"].get(op)
        if entry is None:
            continue
        count = entry.get("count") if isinstance(entry, dict) else None
        latency = entry.get("latency_ns") if isinstance(entry, dict) else None
        if not isinstance(count, int):
            raise BiusplotError(f"{path}: ops.{op} has no integer count")
        if count == 0:
            continue
        if not isinstance(latency, dict) or not all(isinstance(latency.get(q), (int, float))
                                                    for q in ("p50", "p99")):
            raise BiusplotError(f"{path}: ops.{op} has a count but no latency_ns p50 and p99")
        used[op] = entry
    return used


# --- plots -----------------------------------------------------------------
def _figure(width=10, height=5.5):
    """A new matplotlib Figure (no pyplot state; saved as PNG through Agg)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise BiusplotError("matplotlib is missing: apt-get install python3-matplotlib, "
                            "or run Debian's /usr/bin/python3") from None
    return Figure(figsize=(width, height), dpi=150, layout="constrained")


def _save(fig, out):
    """Writes fig as a PNG to out."""
    try:
        fig.savefig(out, format="png")
    except OSError as e:
        raise BiusplotError(f"{out}: {e.strerror}") from None


def _parse_ops(text):
    """'write,zone_append' -> ['write', 'zone_append'] (None stays None: every op)."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name not in OP_CODES:
            raise BiusplotError(f"unknown op '{name}' in --ops (known: {','.join(OPS)})")
    return names


def _labels(labels, paths):
    """The --label values, or each file's name without directory and extension."""
    if labels is None:
        return [os.path.splitext(os.path.basename(p))[0] for p in paths]
    if len(labels) != len(paths):
        raise BiusplotError(f"{len(labels)} --label for {len(paths)} files: give one per file")
    return labels


def plot_lba(trace, out, ops=None, title=None):
    """Offset over time, a dot per request coloured by op; zone ops as markers."""
    recs = read_trace(trace)
    present = [op for op in OPS if np.any(recs["op"] == OP_CODES[op])]
    if ops is None:
        ops = [op for op in present if op not in LBA_UNPLACEABLE]
    for op in ops:
        if op in LBA_UNPLACEABLE:
            raise BiusplotError(f"lba cannot place '{op}' (it has no offset): leave it out of --ops")
    chosen = recs[np.isin(recs["op"], [OP_CODES[op] for op in ops])]
    if len(chosen) == 0:
        raise BiusplotError(f"{trace}: no request of the ops {','.join(ops)} (the trace has {','.join(present)})")
    top = int((chosen["offset"] + chosen["len"]).max())
    unit, scale = ("GiB", 1 << 30) if top >= 1 << 30 else ("MiB", 1 << 20)
    dot = 3 if len(chosen) < 10_000 else 1.5 if len(chosen) < 300_000 else 1  # marker size

    from matplotlib.lines import Line2D
    fig = _figure()
    ax = fig.subplots()
    handles = []
    for op in ops:
        sel = chosen[chosen["op"] == OP_CODES[op]]
        if len(sel) == 0:
            continue
        t, y = sel["time_ns"] / 1e9, sel["offset"] / scale
        colour, label = OP_COLOURS[op], f"{op} ({len(sel):,})"
        if op == "zone_reset_all":
            ax.vlines(t, 0, 1, transform=ax.get_xaxis_transform(), colors=colour, linestyles="--", lw=1)
            handles.append(Line2D([], [], color=colour, ls="--", label=label))
        elif op in ZONE_MARKERS:
            ax.plot(t, y, ls="", marker=ZONE_MARKERS[op], ms=6, color=colour, zorder=3)
            handles.append(Line2D([], [], ls="", marker=ZONE_MARKERS[op], ms=6, color=colour, label=label))
        else:
            ax.plot(t, y, ls="", marker="o", ms=dot, mew=0, color=colour, rasterized=True, zorder=2)
            handles.append(Line2D([], [], ls="", marker="o", ms=5, color=colour, label=label))
    failed = chosen[chosen["result"] != 0]
    if len(failed):
        ax.plot(failed["time_ns"] / 1e9, failed["offset"] / scale, ls="", marker="o", ms=6,
                mfc="none", color="red", zorder=4)
        handles.append(Line2D([], [], ls="", marker="o", ms=6, mfc="none", color="red",
                              label=f"failed ({len(failed):,})"))
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"offset ({unit})")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    ax.set_title(title or f"{os.path.basename(trace)}: offset of each request over time")
    _save(fig, out)


def _cdf(values):
    """x, y of the empirical CDF of values, thinned to at most 5000 points."""
    x = np.sort(values)
    y = np.arange(1, len(x) + 1) / len(x)
    if len(x) > 5000:
        keep = np.unique(np.linspace(0, len(x) - 1, 5000).astype(np.int64))
        x, y = x[keep], y[keep]
    return x, y


def plot_latency(traces, out, ops=None, labels=None, title=None):
    """Latency CDF per (file, op): x log µs, y 0..1."""
    labels = _labels(labels, traces)
    fig = _figure(9, 5.5)
    ax = fig.subplots()
    curves = 0
    for i, (trace, label) in enumerate(zip(traces, labels)):
        recs = read_trace(trace)
        for op in ops or OPS:
            lat = recs["latency_ns"][recs["op"] == OP_CODES[op]]
            if len(lat) == 0:
                continue
            x, y = _cdf(np.maximum(lat, 1) / 1e3)
            name = f"{label}: {op}" if len(traces) > 1 else op
            ax.step(x, y, where="post", color=OP_COLOURS[op], ls=LINE_STYLES[i % len(LINE_STYLES)],
                    label=f"{name} (n={len(lat):,})")
            curves += 1
    if curves == 0:
        raise BiusplotError(f"no request of the ops {','.join(ops)} in {', '.join(traces)}")
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_xlabel("latency in the daemon (µs)")
    ax.set_ylabel("fraction of requests")
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    ax.set_title(title or "latency CDF")
    _save(fig, out)


def plot_fill(stats_paths, out, which="now", labels=None, title=None):
    """The zone fill histogram of each stats file as grouped bars (a bar per file in each bucket)."""
    labels = _labels(labels, stats_paths)
    hists = [fill_histogram(read_stats(p), which, p) for p in stats_paths]
    buckets = hists[0][0]
    for path, (b, _) in zip(stats_paths, hists):
        if b != buckets:
            raise BiusplotError(f"{path}: fill buckets {b} differ from {stats_paths[0]}'s {buckets}")
    fig = _figure(9, 5)
    ax = fig.subplots()
    x = np.arange(len(buckets))
    width = 0.8 / len(hists)
    for i, ((_, counts), label) in enumerate(zip(hists, labels)):
        ax.bar(x + (i - (len(hists) - 1) / 2) * width, counts, width, label=label)
    ax.set_xticks(x, buckets, rotation=30)
    ax.set_xlabel({"now": "fill of the zone now", "reset": "fill of the zone when it was reset",
                   "finish": "fill of the zone when it was finished"}[which])
    ax.set_ylabel({"now": "sequential zones in use (not empty)", "reset": "zone resets", "finish": "zone finishes"}[which])
    ax.grid(alpha=0.3, axis="y")
    if len(hists) > 1:
        ax.legend()
    ax.set_title(title or {"now": "zones by how full they are",
                           "reset": "zones by how full they were when reset",
                           "finish": "zones by how full they were when finished"}[which])
    _save(fig, out)


def plot_ops(stats_path, out, title=None):
    """Count, p50 and p99 latency per op with a count > 0."""
    stats = read_stats(stats_path)
    used = op_stats(stats, stats_path)
    if not used:
        raise BiusplotError(f"{stats_path}: no op has a count > 0")
    names = list(used)
    x = np.arange(len(names))
    fig = _figure(10, 4.5)
    ax_count, ax_lat = fig.subplots(1, 2)
    ax_count.bar(x, [used[n]["count"] for n in names], color=[OP_COLOURS[n] for n in names])
    ax_count.set_ylabel("requests")
    ax_count.set_yscale("log")
    for i, q in enumerate(("p50", "p99")):
        ax_lat.bar(x + (i - 0.5) * 0.4, [max(used[n]["latency_ns"][q], 1) / 1e3 for n in names],
                   0.4, label=q, color=("tab:blue", "tab:orange")[i])
    ax_lat.set_ylabel("latency in the daemon (µs)")
    ax_lat.set_yscale("log")
    ax_lat.legend()
    for ax in (ax_count, ax_lat):
        ax.set_xticks(x, names, rotation=30, ha="right")
        ax.grid(alpha=0.3, axis="y", which="both")
    elapsed = stats.get("elapsed_s")
    span = f", {elapsed:g} s" if isinstance(elapsed, (int, float)) else ""
    fig.suptitle(title or f"{stats.get('device', os.path.basename(stats_path))}{span}: requests per op")
    _save(fig, out)


# --- command line ----------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors also start with `biusplot: ` (status 2)."""

    def error(self, message):
        self.exit(2, f"biusplot: {message}\n{self.format_usage()}")


def _parser():
    """The command line: one subcommand per plot."""
    p = _Parser(prog="biusplot", description="Plots of BIUS statistics and request traces (PNG).")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    ops_help = "comma-separated op names (default: every op in the trace)"

    c = sub.add_parser("lba", help="offset of each request over time")
    c.add_argument("trace", metavar="TRACE")
    c.add_argument("--ops", help=ops_help + "; flush has no offset")

    c = sub.add_parser("latency", help="latency CDF per file and op")
    c.add_argument("traces", metavar="TRACE", nargs="+")
    c.add_argument("--ops", help=ops_help)
    c.add_argument("--label", nargs="+", help="a curve label per TRACE (default: file names)")

    c = sub.add_parser("fill", help="zone fill histogram of stats files, as grouped bars")
    c.add_argument("stats", metavar="STATS_JSON", nargs="+")
    c.add_argument("--which", choices=sorted(FILL_KEYS), default="now",
                   help="now: every zone now; reset/finish: zones at their resets/finishes (default: now)")
    c.add_argument("--label", nargs="+", help="a label per STATS_JSON (default: file names)")

    c = sub.add_parser("ops", help="count and p50/p99 latency per op of a stats file")
    c.add_argument("stats", metavar="STATS_JSON")

    for c in sub.choices.values():
        c.add_argument("-o", "--output", required=True, metavar="PNG", help="the PNG to write")
        c.add_argument("--title", help="the plot's title")
    return p


def main(argv=None):
    """Runs the command line; returns the exit status (2 on bad input)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "lba":
            plot_lba(args.trace, args.output, _parse_ops(args.ops), args.title)
        elif args.command == "latency":
            plot_latency(args.traces, args.output, _parse_ops(args.ops), args.label, args.title)
        elif args.command == "fill":
            plot_fill(args.stats, args.output, args.which, args.label, args.title)
        else:
            plot_ops(args.stats, args.output, args.title)
    except BiusplotError as e:
        print(f"biusplot: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
