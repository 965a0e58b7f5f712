"""Unit tests of report_deep.py: the deep suite's CPU arithmetic and
the targets' verdicts, on figures whose answers are known."""

import unittest

import report_deep

class FakeResults:
    """report.py's Results over fixed medians: (device, job, key) -> value,
    the same for every job unless given per job."""

    def __init__(self, devices, values):
        self.meta = {"suite_deep": " ".join(devices)}
        self.build = {}
        self.values = values

    def suite(self, name):
        return self.meta.get(f"suite_{name}", "").split()

    def med(self, dev, job, key):
        return self.values.get((dev, job, key), self.values.get((dev, key)))

    def stat(self, dev, job, key):
        v = self.med(dev, job, key)
        return None if v is None else {"median": v, "min": v, "max": v, "n": 1}


def figures(bius_kiops, bius_cpu_us, bius_lat):
    """the floor (null_blk-nodata) 3 µs of CPU per I/O, ublk-null-nodata 4 µs (1 µs added), 100
    kIOPS, 50 µs at QD1; bius-null as given."""
    v = {}
    for dev, kiops, cpu, lat in ((report_deep.FLOOR, 300, 3.0, 20), ("ublk-null-nodata", 100, 4.0, 50),
                                 ("bius-null", bius_kiops, bius_cpu_us, bius_lat)):
        v[(dev, "kiops")] = kiops
        v[(dev, "bw")] = kiops * 4
        v[(dev, "cpu_us_per_io")] = cpu
        v[(dev, "lat_mean")] = lat
    v[("bius-null", "daemon_cpu_us_per_io")] = 0.25
    return FakeResults([report_deep.FLOOR, "bius-null", "ublk-null-nodata"], v)


class PeerTest(unittest.TestCase):
    def test_peer_does_the_same_work(self):
        self.assertEqual(report_deep.ublk_peer("bius-null"), "ublk-null-nodata")
        self.assertEqual(report_deep.ublk_peer("bius-zero"), "ublk-null")
        self.assertEqual(report_deep.ublk_peer("bius-ram-default"), "ublk-ram")


class TargetsTest(unittest.TestCase):
    def test_all_met(self):
        # 1.6x IOPS, 0.5 us added (0.5x ublk's 1 us), 20 us (0.4x) at QD1
        _, s = report_deep.tables(figures(160, 3.5, 20))
        t = s["targets"]["bius-null"]
        self.assertEqual(set(t.values()), {True}, t)

    def test_each_target_can_fail(self):
        _, s = report_deep.tables(figures(120, 3.8, 30))
        t = s["targets"]["bius-null"]
        self.assertTrue(t["every row ≥ 1.0× ublk"])
        self.assertFalse(t["4 KiB at QD ≥ 32 ≥ 1.5× ublk's IOPS"])  # 1.2x
        self.assertFalse(t["added CPU/I/O over null_blk ≤ 0.7× ublk's"])  # 0.8x
        self.assertFalse(t["QD1 mean ≤ 0.5× ublk's"])  # 0.6x
        _, s = report_deep.tables(figures(90, 3.5, 20))
        self.assertFalse(s["targets"]["bius-null"]["every row ≥ 1.0× ublk"])

    def test_cpu_in_ns_and_added_over_null_blk(self):
        _, s = report_deep.tables(figures(160, 3.5, 20))
        row = s["jobs"]["deep-randread-qd32"]["bius-null"]
        self.assertAlmostEqual(row["cpu_ns"], 3500)
        self.assertAlmostEqual(row["daemon_cpu_ns"], 250)
        self.assertAlmostEqual(row["added_cpu_ns"], 500)
        self.assertAlmostEqual(row["x_ublk_added_cpu"], 0.5)
        self.assertAlmostEqual(row["x_ublk"], 1.6)

    def test_under_the_floor_is_not_judged(self):
        # bius-null 2.5 us: below the floor's 3 us, so its added CPU is
        # negative; no ratio, and not counted as met
        r = figures(160, 2.5, 20)
        for job, *_ in report_deep.DEPTH_JOBS[1:]:
            r.values[("bius-null", job, "cpu_us_per_io")] = 3.9  # 0.9x: not met
        _, s = report_deep.tables(r)
        self.assertIsNone(s["jobs"]["deep-randread-qd32"]["bius-null"]["x_ublk_added_cpu"])
        self.assertFalse(s["targets"]["bius-null"]["added CPU/I/O over null_blk ≤ 0.7× ublk's"])
        r = figures(160, 2.5, 20)
        _, s = report_deep.tables(r)
        self.assertIsNone(s["targets"]["bius-null"]["added CPU/I/O over null_blk ≤ 0.7× ublk's"])

    def test_missing_peer_is_not_a_verdict(self):
        r = figures(160, 3.5, 20)
        r.meta["suite_deep"] = f"{report_deep.FLOOR} bius-null"
        _, s = report_deep.tables(r)
        self.assertEqual(list(s["targets"]["bius-null"].values()), [None])

    def test_no_deep_suite_no_tables(self):
        r = figures(160, 3.5, 20)
        r.meta = {}
        self.assertEqual(report_deep.tables(r), ([], {}))


if __name__ == "__main__":
    unittest.main()
