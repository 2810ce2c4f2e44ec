import os
import tempfile
import unittest

from fake_mfu_service import ServerHandle
from goodput_sdk import Reporter
from goodput_sdk._proto import mfu_pb2
from goodput_sdk.megatron import MegatronLogFollower, ThroughputLine, parse_line


def megatron_line(iteration, tflops, elapsed_ms=1548.1, prefix=""):
    return (f"{prefix} [2025-01-07 10:12:01] iteration {iteration:8d}/{50000:8d} | "
            f"consumed samples: {iteration * 512:12d} | elapsed time per iteration (ms): "
            f"{elapsed_ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tflops:.1f} | "
            "learning rate: 2.999999E-04 | global batch size:   512 | lm loss: 6.681113E+00 | "
            "loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 | "
            "number of nan iterations:   0 |\n")


class RecordingReporter:

    def __init__(self):
        self.reports = []
        self.flushed = False

    def report(self, **kwargs):
        self.reports.append(kwargs)
        return True

    def flush(self, timeout_s=0):
        self.flushed = True
        return True

    def close(self, timeout_s=0):
        return True


class ParseLineTest(unittest.TestCase):

    def test_reads_throughput_iteration_and_step_time(self):
        self.assertEqual(parse_line(megatron_line(100, 412.3, 1548.1)),
                         ThroughputLine(tflops_per_gpu=412.3, iteration=100,
                                        train_iterations=50000,
                                        elapsed_ms_per_iteration=1548.1))

    def test_tolerates_launcher_prefixes_and_missing_fields(self):
        self.assertEqual(parse_line(megatron_line(7, 55.0, prefix="[default3]:")).iteration, 7)
        self.assertEqual(parse_line("0: throughput per GPU (TFLOP/s/GPU): 57.6 |"),
                         ThroughputLine(tflops_per_gpu=57.6))
        self.assertEqual(parse_line("compute per GPU (TFLOP/s/GPU): 496.3 (avg 496.1)")
                         .tflops_per_gpu, 496.3)

    def test_ignores_lines_without_a_finite_throughput(self):
        self.assertIsNone(parse_line(" iteration 5/ 10 | consumed samples: 10 | lm loss: 1.0"))
        self.assertIsNone(parse_line("throughput per GPU (TFLOP/s/GPU): nan |"))
        self.assertIsNone(parse_line(""))


class FollowerTest(unittest.TestCase):

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.path = os.path.join(tmp.name, "train.log")

    def append(self, text):
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(text)

    def test_reports_only_new_complete_lines(self):
        self.append(megatron_line(10, 300.0))
        reporter = RecordingReporter()
        follower = MegatronLogFollower(self.path, reporter)
        self.addCleanup(follower.stop)
        self.assertEqual(follower.poll(), 0)  # lines already there are history

        self.append("building model ...\n" + megatron_line(20, 410.0, 1500.0))
        partial = megatron_line(30, 420.0, 2000.0)
        self.append(partial[:40])
        self.assertEqual(follower.poll(), 1)
        self.append(partial[40:])
        self.assertEqual(follower.poll(), 1)

        first, second = reporter.reports
        self.assertEqual((first["tflops_per_gpu"], first["step"]), (410.0, 20))
        self.assertEqual(first["step_times_s"], [1.5])
        self.assertAlmostEqual(first["interval_s"], 1.5)
        self.assertEqual((second["tflops_per_gpu"], second["step"]), (420.0, 30))
        self.assertAlmostEqual(second["interval_s"], 10 * 2.0)  # 10 iterations since line 20

    def test_reads_from_the_start_waits_for_the_file_and_survives_truncation(self):
        reporter = RecordingReporter()
        follower = MegatronLogFollower(self.path, reporter, from_start=True)
        self.assertEqual(follower.poll(), 0)  # no file yet
        self.append(megatron_line(1, 100.0) + megatron_line(2, 110.0))
        self.assertEqual(follower.poll(), 2)
        with open(self.path, "w", encoding="utf-8") as f:  # truncated: a restarted job
            f.write(megatron_line(1, 120.0))
        self.assertEqual(follower.poll(), 1)
        self.assertEqual([r["tflops_per_gpu"] for r in reporter.reports], [100.0, 110.0, 120.0])
        follower.stop()
        self.assertTrue(reporter.flushed)

    def test_lines_land_in_the_service_as_log_reports(self):
        server = ServerHandle()
        self.addCleanup(server.stop)
        self.append("")
        follower = MegatronLogFollower(self.path, endpoint=server.endpoint, job="99",
                                       cluster="eos", environ={}, precision="bf16",
                                       flush_interval_s=0.05)
        follower.poll()
        self.append(megatron_line(50, 68.2, 61674.3) + megatron_line(55, 68.4, 61614.9))
        self.assertEqual(follower.poll(), 2)
        follower.stop(timeout_s=10)
        reports = sorted(server.service.report_list(), key=lambda r: r.step)
        self.assertEqual([(r.step, r.model_tflops_per_gpu) for r in reports],
                         [(50, 68.2), (55, 68.4)])
        for r in reports:
            self.assertEqual(r.source, mfu_pb2.MFU_REPORT_SOURCE_LOG)
            self.assertEqual(r.framework, "megatron-lm")
            self.assertEqual((r.job.cluster, r.job.job_id), ("eos", "99"))
        span_ns = reports[1].interval.end_time.ToNanoseconds() - \
            reports[1].interval.start_time.ToNanoseconds()
        self.assertEqual(span_ns, int(5 * 61.6149 * 1e9))


if __name__ == "__main__":
    unittest.main()
