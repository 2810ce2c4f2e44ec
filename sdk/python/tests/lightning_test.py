import unittest

from fake_mfu_service import ServerHandle
from goodput_sdk.lightning import GoodputCallback, precision_from_trainer


class FakeTensor:
    """Stands in for a 0-d torch tensor (has .item())."""

    def __init__(self, value):
        self.value = value

    def item(self):
        return self.value


class FakeTrainer:
    """The attributes of lightning.pytorch.Trainer that the callback reads."""

    def __init__(self, world_size=8, precision="bf16-mixed", is_global_zero=True):
        self.global_step = 0
        self.world_size = world_size
        self.precision = precision
        self.is_global_zero = is_global_zero
        self.callback_metrics = {}
        self.logged_metrics = {}


class FakeClock:

    def __init__(self):
        self.now_s = 1000.0

    def __call__(self):
        return self.now_s


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


def run_steps(callback, trainer, clock, steps, step_time_s):
    for _ in range(steps):
        clock.now_s += step_time_s
        trainer.global_step += 1
        callback.on_train_batch_end(trainer, None, None, None, trainer.global_step - 1)


class GoodputCallbackTest(unittest.TestCase):

    def test_reports_flops_per_step_with_the_measured_step_time(self):
        reporter, clock, trainer = RecordingReporter(), FakeClock(), FakeTrainer()
        callback = GoodputCallback(flops_per_step=4.0e15, tokens_per_step=1_048_576,
                                   every_n_steps=10, reporter=reporter, clock=clock)
        callback.on_train_start(trainer, None)
        run_steps(callback, trainer, clock, 25, 0.5)
        self.assertEqual(len(reporter.reports), 2)
        first = reporter.reports[0]
        self.assertEqual(first["flops_per_step"], 4.0e15)
        self.assertAlmostEqual(first["step_time_s"], 0.5)
        self.assertEqual(first["gpu_count"], 8)
        self.assertEqual(first["step"], 10)
        self.assertAlmostEqual(first["interval_s"], 5.0)
        self.assertEqual(first["precision"], "bf16")
        self.assertAlmostEqual(first["tokens_per_s"], 1_048_576 / 0.5)
        self.assertEqual(reporter.reports[1]["step"], 20)
        callback.on_train_end(trainer, None)
        self.assertTrue(reporter.flushed)

    def test_flops_formula_may_be_a_callable(self):
        reporter, clock, trainer = RecordingReporter(), FakeClock(), FakeTrainer(world_size=2)
        callback = GoodputCallback(flops_per_step=lambda t, m: 1e12 * t.world_size,
                                   every_n_steps=1, reporter=reporter, clock=clock)
        callback.on_train_start(trainer, None)
        run_steps(callback, trainer, clock, 1, 2.0)
        self.assertEqual(reporter.reports[0]["flops_per_step"], 2e12)

    def test_uses_throughput_monitor_metrics_without_a_flops_formula(self):
        reporter, clock, trainer = RecordingReporter(), FakeClock(), FakeTrainer()
        callback = GoodputCallback(every_n_steps=5, reporter=reporter, clock=clock)
        callback.on_train_start(trainer, None)
        trainer.callback_metrics["device/flops_per_sec"] = FakeTensor(4.125e14)
        run_steps(callback, trainer, clock, 5, 1.0)
        trainer.callback_metrics = {"device/mfu": FakeTensor(0.42)}
        run_steps(callback, trainer, clock, 5, 1.0)
        self.assertAlmostEqual(reporter.reports[0]["tflops_per_gpu"], 412.5)
        self.assertAlmostEqual(reporter.reports[1]["mfu"], 0.42)

    def test_reads_the_stage_prefixed_keys_of_lightning_2_1_and_later(self):
        # Lightning >= 2.1 logs Throughput.compute() keys as f"{stage}{separator}{key}" into
        # trainer.logged_metrics: "train/device/flops_per_sec", or with separator="|"
        # "train|device|mfu"; validation throughput is not the training figure.
        reporter, clock, trainer = RecordingReporter(), FakeClock(), FakeTrainer()
        callback = GoodputCallback(every_n_steps=5, reporter=reporter, clock=clock)
        callback.on_train_start(trainer, None)
        trainer.logged_metrics = {"validate/device/flops_per_sec": FakeTensor(1e12),
                                  "train/device/flops_per_sec": FakeTensor(3.96e14),
                                  "train/device/samples_per_sec": FakeTensor(12.0)}
        run_steps(callback, trainer, clock, 5, 1.0)
        trainer.logged_metrics = {"train|device|mfu": FakeTensor(0.38)}
        run_steps(callback, trainer, clock, 5, 1.0)
        trainer.logged_metrics = {"validate/device/mfu": FakeTensor(0.9)}
        run_steps(callback, trainer, clock, 5, 1.0)
        self.assertEqual(len(reporter.reports), 2)
        self.assertAlmostEqual(reporter.reports[0]["tflops_per_gpu"], 396.0)
        self.assertAlmostEqual(reporter.reports[1]["mfu"], 0.38)

    def test_reports_nothing_without_a_figure_or_off_rank_zero(self):
        reporter, clock = RecordingReporter(), FakeClock()
        trainer = FakeTrainer()
        callback = GoodputCallback(every_n_steps=1, reporter=reporter, clock=clock)
        callback.on_train_start(trainer, None)
        run_steps(callback, trainer, clock, 3, 1.0)
        self.assertEqual(reporter.reports, [])

        other_rank = FakeTrainer(is_global_zero=False)
        callback = GoodputCallback(flops_per_step=1e15, every_n_steps=1, clock=clock,
                                   endpoint="127.0.0.1:1", job="1", environ={})
        callback.on_train_start(other_rank, None)
        run_steps(callback, other_rank, clock, 3, 1.0)
        self.assertIsNone(callback.reporter)

    def test_maps_lightning_precision_flags(self):
        self.assertEqual(precision_from_trainer(FakeTrainer(precision="16-mixed")), "fp16")
        self.assertEqual(precision_from_trainer(FakeTrainer(precision="bf16-true")), "bf16")
        self.assertEqual(precision_from_trainer(FakeTrainer(precision="transformer-engine")),
                         "fp8")
        self.assertIsNone(precision_from_trainer(FakeTrainer(precision="weird")))

    def test_reports_land_and_its_own_reporter_is_closed_at_train_end(self):
        server = ServerHandle()
        self.addCleanup(server.stop)
        clock, trainer = FakeClock(), FakeTrainer()
        callback = GoodputCallback(flops_per_step=4.0e15, every_n_steps=2, clock=clock,
                                   endpoint=server.endpoint, job="77", cluster="eos",
                                   environ={}, flush_interval_s=60)
        callback.on_train_start(trainer, None)
        run_steps(callback, trainer, clock, 4, 1.5)
        callback.on_train_end(trainer, None)
        self.assertFalse(callback.reporter.enabled)  # closed, after delivering
        reports = sorted(server.service.report_list(), key=lambda r: r.step)
        self.assertEqual([r.step for r in reports], [2, 4])
        self.assertEqual(reports[0].framework, "pytorch-lightning")
        self.assertEqual(reports[0].step_flops.step_time_s, 1.5)
        self.assertEqual(reports[0].step_flops.gpu_count, 8)


if __name__ == "__main__":
    unittest.main()
