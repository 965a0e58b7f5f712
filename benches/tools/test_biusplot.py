"""Unit tests of biusplot.py: the readers on both trace formats, every
command on small synthetic files, and the exit status 2 with a `biusplot: `
message on each kind of bad input.

    python3 -m unittest discover -s benches/tools -p 'test_*.py'
"""

import contextlib
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import biusplot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
HEADER = "time_ns,queue,op,offset,len,latency_ns,result"

# (time_ns, queue, op, offset, len, latency_ns, result), not sorted by time:
# a file holds each queue's requests in completion order.
RECORDS = [
    (5_000, 1, "write", 1 << 20, 4096, 2_100, 0),
    (1_000, 0, "write", 0, 4096, 1_800, 0),
    (2_000, 0, "zone_append", 64 << 20, 8192, 3_000, 0),
    (3_000, 1, "read", 1 << 40, 131072, 900, 0),
    (4_000, 0, "flush", 0, 0, 50_000, 0),
    (6_000, 1, "zone_reset", 64 << 20, 0, 20_000, 0),
    (7_000, 0, "zone_finish", 128 << 20, 0, 15_000, -5),
    (8_000, 65535, "zone_reset_all", 0, 0, 40_000, 0),
    (9_000, 0, "discard", 2 << 30, 1 << 20, (1 << 64) - 1, -95),
]


def binary_trace(records, version=1, magic=b"BIUSTRC1"):
    """The bytes of a binary trace of records, laid out as the schema says (not as biusplot reads it)."""
    out = magic + struct.pack("<IIQQ", version, 40, 1_700_000_000_000_000_000, 0)
    for t, queue, op, offset, length, latency, result in records:
        out += struct.pack("<QQQIHBBiI", t, offset, latency, length, queue,
                           biusplot.OPS.index(op), 0, result, 0)
    return out


def csv_trace(records):
    """The text of a CSV trace of records."""
    return HEADER + "\n" + "".join(",".join(str(v) for v in r) + "\n" for r in records)


def stats(zoned=True, fill_now=(3, 0, 1, 0, 0, 0, 0, 0, 2, 10)):
    """A `biusctl stats --json` object: a few reads and writes, zoned or not."""
    def op(count, p50=1000, p99=5000):
        lat = {"mean": p50, "p50": p50, "p90": p99, "p99": p99, "p999": p99, "max": p99}
        return {"count": count, "bytes": count * 4096, "errors": 0, "latency_ns": lat}
    ops = {name: op(0) for name in biusplot.OPS}
    ops.update(read=op(10), write=op(200, 2000, 9000), zone_reset=op(4, 20000, 40000))
    fill = {
        "zone_bytes": 64 << 20, "zone_capacity": 64 << 20, "zones": 20, "conventional_zones": 4,
        "host_bytes_written": 800 << 20, "appends": 0, "resets": 4, "finishes": 1,
        "opens_explicit": 0, "opens_implicit": 12, "closes": 0, "bytes_per_reset": 200 << 20,
        "fill_buckets": [f"{10 * i}-{10 * i + 10}%" for i in range(10)],
        "fill_at_reset": [0, 0, 0, 0, 0, 0, 0, 1, 0, 3],
        "fill_at_finish": [0, 0, 0, 0, 1, 0, 0, 0, 0, 0],
        "fill_now": list(fill_now), "held_bytes": 16 << 26, "written_bytes_now": 700 << 20,
    }
    return {"device": "bius0", "elapsed_s": 12.5, "ops": ops,
            "kernel": {"read_ios": 10, "read_sectors": 80, "write_ios": 200, "write_sectors": 1600,
                       "discard_ios": 0, "discard_sectors": 0, "flush_ios": 0},
            "zoned": fill if zoned else None,
            "trace": {"active": False, "file": None, "records": 0, "dropped": 0}}


class BiusplotTest(unittest.TestCase):
    """Each test gets a fresh temporary directory with helpers to write files into it."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        """A path in the test's temporary directory."""
        return os.path.join(self.dir, name)

    def write(self, name, content):
        """Writes content (bytes or str) to name in the temporary directory; returns its path."""
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(self.path(name), mode) as f:
            f.write(content)
        return self.path(name)

    def run_main(self, *argv):
        """(exit status, stderr) of biusplot's main(argv), in this process."""
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                status = biusplot.main([str(a) for a in argv])
            except SystemExit as e:
                status = e.code
        return status, err.getvalue()

    def assert_png(self, argv, out):
        """Runs argv and checks it succeeded and wrote a PNG to out."""
        status, err = self.run_main(*argv, "-o", out)
        self.assertEqual((status, err), (0, ""))
        with open(out, "rb") as f:
            self.assertEqual(f.read(len(PNG_MAGIC)), PNG_MAGIC)

    def assert_bad(self, argv, fragment):
        """Runs argv and checks it exited 2 with a one-line `biusplot: ` message holding fragment."""
        status, err = self.run_main(*argv, "-o", self.path("bad.png"))
        self.assertEqual(status, 2, err)
        self.assertTrue(err.startswith("biusplot: "), err)
        self.assertIn(fragment, err.splitlines()[0])
        self.assertFalse(os.path.exists(self.path("bad.png")))


class ReaderTest(BiusplotTest):
    """read_trace and read_stats return exactly what the files hold."""

    def expected(self):
        """RECORDS sorted by time, as read_trace's rows (op as its code)."""
        return [(t, offset, latency, length, queue, biusplot.OPS.index(op), result)
                for t, queue, op, offset, length, latency, result in sorted(RECORDS)]

    def test_binary(self):
        recs = biusplot.read_trace(self.write("t.trc", binary_trace(RECORDS)))
        self.assertEqual(recs.dtype.names, ("time_ns", "offset", "latency_ns", "len", "queue", "op", "result"))
        self.assertEqual(recs.tolist(), self.expected())

    def test_csv(self):
        recs = biusplot.read_trace(self.write("t.csv", csv_trace(RECORDS)))
        self.assertEqual(recs.dtype, biusplot.RECORD_DTYPE)
        self.assertEqual(recs.tolist(), self.expected())

    def test_csv_crlf_and_blank_lines(self):
        text = csv_trace(RECORDS).replace("\n", "\r\n") + "\r\n"
        self.assertEqual(biusplot.read_trace(self.write("t.csv", text)).tolist(), self.expected())

    def test_binary_partial_last_record_is_ignored(self):
        path = self.write("t.trc", binary_trace(RECORDS) + b"\0" * 12)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(biusplot.read_trace(path).tolist(), self.expected())
        self.assertIn("last 12 bytes", err.getvalue())

    def test_stats(self):
        self.assertEqual(biusplot.read_stats(self.write("s.json", json.dumps(stats()))), stats())

    def test_fill_histogram_and_op_stats(self):
        labels, counts = biusplot.fill_histogram(stats(), "reset")
        self.assertEqual((labels[0], labels[-1], counts), ("0-10%", "90-100%", [0, 0, 0, 0, 0, 0, 0, 1, 0, 3]))
        self.assertEqual(list(biusplot.op_stats(stats())), ["read", "write", "zone_reset"])


class CommandTest(BiusplotTest):
    """Every command writes a PNG."""

    def setUp(self):
        super().setUp()
        self.trc = self.write("t.trc", binary_trace(RECORDS))
        self.csv = self.write("t.csv", csv_trace(RECORDS))
        self.stats = self.write("s.json", json.dumps(stats()))
        self.stats2 = self.write("s2.json", json.dumps(stats(fill_now=(0, 1, 2, 3, 4, 5, 6, 7, 8, 9))))

    def test_lba(self):
        self.assert_png(["lba", self.trc], self.path("lba.png"))
        self.assert_png(["lba", self.csv, "--ops", "write,zone_append,zone_reset", "--title", "T"],
                        self.path("lba2.png"))

    def test_latency(self):
        self.assert_png(["latency", self.trc, self.csv, "--label", "bin", "csv"], self.path("lat.png"))
        self.assert_png(["latency", self.trc, "--ops", "write,read"], self.path("lat2.png"))

    def test_fill(self):
        for which in ("now", "reset", "finish"):
            self.assert_png(["fill", self.stats, self.stats2, "--which", which, "--label", "64M", "256M"],
                            self.path(f"fill-{which}.png"))
        self.assert_png(["fill", self.stats], self.path("fill1.png"))

    def test_ops(self):
        self.assert_png(["ops", self.stats], self.path("ops.png"))

    def test_as_a_program(self):
        """The script itself: exit 0 with a PNG, exit 2 with the message on bad input."""
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "biusplot.py")
        out = self.path("prog.png")
        ok = subprocess.run([sys.executable, script, "ops", self.stats, "-o", out],
                            capture_output=True, text=True)
        self.assertEqual((ok.returncode, ok.stderr), (0, ""))
        self.assertTrue(os.path.getsize(out) > 0)
        bad = subprocess.run([sys.executable, script, "lba", self.path("missing.trc"), "-o", out],
                             capture_output=True, text=True)
        self.assertEqual(bad.returncode, 2)
        self.assertTrue(bad.stderr.startswith("biusplot: "), bad.stderr)


class BadInputTest(BiusplotTest):
    """Each kind of bad input: exit status 2 and a `biusplot: ` message saying what is wrong."""

    def test_missing_file(self):
        self.assert_bad(["lba", self.path("nope.trc")], "nope.trc: No such file or directory")
        self.assert_bad(["fill", self.path("nope.json")], "nope.json: No such file or directory")

    def test_wrong_magic(self):
        self.assert_bad(["lba", self.write("t.trc", binary_trace(RECORDS, magic=b"BIUSTRC9"))],
                        "not a BIUS trace")

    def test_wrong_version(self):
        self.assert_bad(["latency", self.write("t.trc", binary_trace(RECORDS, version=2))],
                        "binary trace version 2, biusplot reads version 1")

    def test_short_header(self):
        self.assert_bad(["lba", self.write("t.trc", b"BIUSTRC1\1\0")], "header cut short")

    def test_unknown_op_code(self):
        data = bytearray(binary_trace(RECORDS[:2]))
        data[32 + 40 + 30] = 12  # the second record's op
        self.assert_bad(["lba", self.write("t.trc", bytes(data))], "record 1 has op code 12")

    def test_malformed_csv_line(self):
        lines = csv_trace(RECORDS).splitlines()
        cases = [
            ("1000,0,write,0,4096,1800", ":3: 6 fields, expected 7"),
            ("1000,0,write,0,4k,1800,0", ":3: len '4k' is not an integer"),
            ("1000,0,wirte,0,4096,1800,0", ":3: unknown op 'wirte'"),
            ("-1,0,write,0,4096,1800,0", ":3: time_ns -1 out of range"),
            ("1000,70000,write,0,4096,1800,0", ":3: queue 70000 out of range"),
        ]
        for line, fragment in cases:
            with self.subTest(line=line):
                text = "\n".join(lines[:2] + [line] + lines[2:]) + "\n"
                self.assert_bad(["lba", self.write("t.csv", text)], fragment)

    def test_wrong_csv_header(self):
        self.assert_bad(["lba", self.write("t.csv", "time_ns,queue,op\n1,0,write\n")], ":1: CSV header")

    def test_empty_trace(self):
        self.assert_bad(["lba", self.write("e.trc", binary_trace([]))], "the trace holds no records")
        self.assert_bad(["latency", self.write("e.csv", HEADER + "\n")], "the trace holds no records")

    def test_no_request_of_the_ops(self):
        trc = self.write("t.trc", binary_trace(RECORDS))
        self.assert_bad(["lba", trc, "--ops", "write_zeroes"], "no request of the ops write_zeroes")
        self.assert_bad(["latency", trc, "--ops", "zone_open"], "no request of the ops zone_open")
        self.assert_bad(["lba", trc, "--ops", "flush"], "lba cannot place 'flush'")
        self.assert_bad(["lba", trc, "--ops", "wrte"], "unknown op 'wrte' in --ops")

    def test_label_count(self):
        trc = self.write("t.trc", binary_trace(RECORDS))
        self.assert_bad(["latency", trc, trc, "--label", "one"], "1 --label for 2 files")

    def test_bad_stats(self):
        self.assert_bad(["ops", self.write("s.json", "{\"ops\": ")], "s.json:1: not JSON")
        self.assert_bad(["ops", self.write("s.json", "[1, 2]")], "no \"ops\" object")
        self.assert_bad(["fill", self.write("s.json", json.dumps(stats(zoned=False)))],
                        "device bius0 is not zoned")
        idle = stats()
        idle["ops"] = {name: {"count": 0} for name in biusplot.OPS}
        self.assert_bad(["ops", self.write("s.json", json.dumps(idle))], "no op has a count > 0")

    def test_usage_error(self):
        self.assert_bad(["lba"], "the following arguments are required")


if __name__ == "__main__":
    unittest.main()
