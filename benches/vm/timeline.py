#!/usr/bin/env python3
"""Where a request's time goes: the ftrace windows of a traced bench run.

    timeline.py RESULTS-DIR

Reads the <run>.trace.txt files that `scripts/bench.sh -t` (guest knob
trace=1) leaves beside each fio run in RESULTS-DIR/bench/fio/ (and
bench/models/fio/ for the models suite) and writes
RESULTS-DIR/timeline.md: for each device and job, the median time of each
phase of a request, from fio's system call to its return (submit,
return, call and fio for psync runs only; the others for every request,
whatever the engine):

  submit    fio enters pread64/pwrite64 .. block_rq_issue (the driver's
            queue_rq; for plugged writes this includes the hop through
            kblockd)
  to daemon block_rq_issue .. bius_fetch (the daemon's read() takes it:
            its wake-up, or its poll)
  daemon    bius_fetch .. bius_complete (the daemon's own work: back to
            user space, the backend, write())
  ending    bius_complete .. block_rq_complete (map modes: the unmap)
  device    block_rq_issue .. block_rq_complete (every blk-mq device)
  return    block_rq_complete .. fio's system call returns (waking fio)
  call      the whole system call
  fio       fio's system call returns .. its next one (fio in user space)

and the wake-up latencies (sched_waking .. sched_switch onto the CPU) of
fio and of the servers' threads, split by whether the waker ran on the same
CPU, plus the task switches per request.  Tracing itself slows every path
(each event costs a few µs under TCG): compare phases, not totals with
untraced runs.  Standard library only.
"""

import collections
import os
import re
import statistics
import sys

LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (.*)$")
SYS_ENTER = re.compile(r"^sys_(?:pread64|pwrite64)\(fd: \w+, buf: \w+, count: \w+, pos: (\w+)\)")
SYS_EXIT = re.compile(r"^sys_(?:pread64|pwrite64) -> ")
BLOCK_RQ = re.compile(r"^(block_rq_issue|block_rq_complete): \d+,\d+ \S+ (?:\d+ )?\(\S*\) (\d+) \+ \d+")
BIUS_RQ = re.compile(r"^(bius_fetch|bius_complete): .* sector=(\d+)")
WAKING = re.compile(r"^sched_waking: comm=.* pid=(\d+) prio=\d+ target_cpu=(\d+)")
SWITCH = re.compile(r"^sched_switch: prev_comm=(.*) prev_pid=(\d+) .* ==> next_comm=(.*) next_pid=(\d+) ")

# name, from event, to event: the phases of a request (block_rq_issue ..
# block_rq_complete, whatever the fio engine), then those of a psync call
REQUEST_PHASES = [
    ("to daemon", "block_rq_issue", "bius_fetch"),
    ("daemon", "bius_fetch", "bius_complete"),
    ("ending", "bius_complete", "block_rq_complete"),
    ("device", "block_rq_issue", "block_rq_complete"),
]
CALL_PHASES = [
    ("submit", "enter", "block_rq_issue"),
    ("return", "block_rq_complete", "exit"),
    ("call", "enter", "exit"),
]
PHASE_ORDER = ["submit", "to daemon", "daemon", "ending", "device", "return", "call"]


def server_thread(comm):
    return comm.startswith("bius-q") or comm.startswith("nbdkit")


def parse(path):
    """Yield (comm, pid, cpu, µs, event text) for each trace line."""
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                yield m.group(1), int(m.group(2)), int(m.group(3)), float(m.group(4)) * 1e6, m.group(5)


class Tally:
    """Phase samples, wake-up samples and counts of one device and job."""

    def __init__(self):
        self.phases = collections.defaultdict(list)
        self.wakes = collections.defaultdict(list)
        self.switches = collections.Counter()
        self.calls = 0
        self.requests = 0


def analyse(path, tally):
    """Add the requests, wake-ups and switches of one trace window to tally."""
    open_calls = {}  # fio pid -> record of its open system call
    by_sector = collections.defaultdict(list)  # sector -> open calls there, oldest first
    requests = collections.defaultdict(list)  # sector -> requests issued there, oldest first
    last_exit = {}  # fio pid -> time its last call returned
    waking = {}  # pid -> (time, waker cpu, target cpu)
    for comm, pid, cpu, t, text in parse(path):
        m = SYS_ENTER.match(text)
        if m and comm == "fio":
            rec = {"enter": t, "sector": int(m.group(1), 16) // 512}
            open_calls[pid] = rec
            by_sector[rec["sector"]].append(rec)
            if pid in last_exit:
                tally.phases["fio"].append(t - last_exit.pop(pid))
            continue
        if SYS_EXIT.match(text) and comm == "fio":
            rec = open_calls.pop(pid, None)
            last_exit[pid] = t
            if rec is None:
                continue
            by_sector[rec["sector"]].remove(rec)
            rec["exit"] = t
            tally.calls += 1
            add_phases(tally, CALL_PHASES, rec)
            continue
        m = BLOCK_RQ.match(text) or BIUS_RQ.match(text)
        if m:
            event, sector = m.group(1), int(m.group(2))
            if event == "block_rq_issue":
                requests[sector].append({})
            # the oldest open call and request at this sector without this
            # event yet
            for recs in (by_sector.get(sector, []), requests.get(sector, [])):
                for rec in recs:
                    if event not in rec:
                        rec[event] = t
                        break
            if event == "block_rq_complete":
                done = [r for r in requests.get(sector, []) if event in r]
                if done:
                    requests[sector].remove(done[0])
                    tally.requests += 1
                    add_phases(tally, REQUEST_PHASES, done[0])
            continue
        m = WAKING.match(text)
        if m:
            waking[int(m.group(1))] = (t, cpu, int(m.group(2)))
            continue
        m = SWITCH.match(text)
        if m:
            tally.switches[task_class(m.group(1))] += 1
            w = waking.pop(int(m.group(4)), None)
            who = task_class(m.group(3))
            if w and who in ("fio", "server"):
                where = "same CPU" if w[1] == w[2] else "other CPU"
                tally.wakes[f"{who}, {where}"].append(t - w[0])


def add_phases(tally, phases, rec):
    """Add each phase whose two events rec has."""
    for name, a, b in phases:
        if a in rec and b in rec:
            tally.phases[name].append(rec[b] - rec[a])


def task_class(comm):
    if comm == "fio":
        return "fio"
    if server_thread(comm):
        return "server"
    if comm.startswith("kworker"):
        return "kworker"
    if comm.startswith("swapper"):
        return "idle"
    return "other"


def med(values):
    return f"{statistics.median(values):.0f}" if values else "–"


def main():
    res = sys.argv[1]
    runs = []
    # the runs of the suites (bench/) and of the models suite (bench/models/)
    for suite in (os.path.join(res, "bench"), os.path.join(res, "bench", "models")):
        if not os.path.exists(os.path.join(suite, "runs.txt")):
            continue
        with open(os.path.join(suite, "runs.txt")) as f:
            for line in f:
                rep, job, dev, name = line.split()
                trace = os.path.join(suite, "fio", name + ".trace.txt")
                if os.path.exists(trace):
                    runs.append((dev, job, trace))
    if not runs:
        sys.exit(f"timeline.py: no .trace.txt in {res}/bench (run scripts/bench.sh -t)")

    tallies = {}  # (device, job) -> Tally, in the order of the runs
    for dev, job, trace in runs:
        analyse(trace, tallies.setdefault((dev, job), Tally()))

    names = PHASE_ORDER + ["fio"]
    wake_kinds = ["fio, same CPU", "fio, other CPU", "server, same CPU", "server, other CPU"]
    classes = ["fio", "server", "kworker", "idle", "other"]
    built = ""
    if os.path.exists(os.path.join(res, "build.txt")):
        with open(os.path.join(res, "build.txt")) as f:
            built = "Built from: " + "; ".join(f"`{line.strip()}`" for line in f if line.strip()) + ". "
    out = ["# Where a request's time goes (ftrace, `scripts/bench.sh -t`)", "",
           built + "Run: `" + os.path.basename(os.path.realpath(res)) + "`.", "",
           "Medians in µs over the requests of every traced window (0.5 s per run, "
           "after the ramp). Tracing slows every path: compare phases, not totals "
           "with untraced runs. Phases: see `benches/vm/timeline.py`.", "",
           "| device | job | calls | requests | " + " | ".join(names) + " |",
           "|---|---|---:|---:|" + "---:|" * len(names)]
    for (dev, job), tally in tallies.items():
        out.append(f"| {dev} | {job} | {tally.calls} | {tally.requests} | "
                   + " | ".join(med(tally.phases[n]) for n in names) + " |")
    out += ["", "## Wake-up latency (sched_waking .. running), median µs [count]", "",
            "| device | job | " + " | ".join(wake_kinds) + " |",
            "|---|---|" + "---:|" * len(wake_kinds)]
    for (dev, job), tally in tallies.items():
        out.append(f"| {dev} | {job} | " + " | ".join(
            f"{med(tally.wakes[k])} [{len(tally.wakes[k])}]" for k in wake_kinds) + " |")
    out += ["", "## Task switches per request, by the task switched out", "",
            "| device | job | " + " | ".join(classes) + " |",
            "|---|---|" + "---:|" * len(classes)]
    for (dev, job), tally in tallies.items():
        n = max(tally.requests, 1)
        out.append(f"| {dev} | {job} | "
                   + " | ".join(f"{tally.switches[c] / n:.2f}" for c in classes) + " |")
    with open(os.path.join(res, "timeline.md"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
