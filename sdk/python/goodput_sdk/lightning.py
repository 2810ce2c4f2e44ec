"""PyTorch Lightning callback that reports a run's model throughput to goodput.

Lightning is imported when this module is imported, not by `goodput_sdk`; without Lightning
installed the callback is a plain object with the same hooks (usable with any trainer-like
object that has the attributes read below).

    from goodput_sdk.lightning import GoodputCallback
    trainer = L.Trainer(callbacks=[GoodputCallback(flops_per_step=6 * n_params * tokens_per_step)])

Every `every_n_steps` optimizer steps, on global rank 0 only, it reports one of:
- `flops_per_step` (model FLOPs of one optimizer step over the whole job, a number or a
  callable(trainer, pl_module) -> number) with the measured mean step time;
- otherwise the per-device throughput that Lightning's ThroughputMonitor logs
  ("train/device/flops_per_sec" -> TFLOP/s per GPU, or "train/device/mfu"; "device/..." in
  Lightning 2.0; any `separator`), read from the trainer's logged_metrics / callback_metrics.
Trainer attributes read: global_step, is_global_zero, world_size, precision,
callback_metrics, logged_metrics.
"""

import time
from typing import Any, Callable, Mapping, Optional, Union

from goodput_sdk.reporter import Reporter


def _lightning_callback_base():
    for module in ("lightning.pytorch", "pytorch_lightning"):
        try:
            mod = __import__(module, fromlist=["Callback"])
            return mod.Callback, getattr(mod, "__version__", "")
        except Exception:  # noqa: BLE001 - absent or broken installs both mean "no Lightning"
            continue
    return object, ""


_CallbackBase, _LIGHTNING_VERSION = _lightning_callback_base()

# Lightning precision flags -> goodput precision. FP32 matmuls on tensor cores run as TF32.
_PRECISIONS = {
    "bf16": "bf16", "bf16-mixed": "bf16", "bf16-true": "bf16",
    "16": "fp16", "16-mixed": "fp16", "16-true": "fp16",
    "32": "tf32", "32-true": "tf32",
    "64": "fp64", "64-true": "fp64",
    "transformer-engine": "fp8", "transformer-engine-float16": "fp8",
}

FlopsSource = Union[float, int, Callable[[Any, Any], float]]


def precision_from_trainer(trainer: Any) -> Optional[str]:
    """goodput precision name for `trainer.precision` ("bf16-mixed" -> "bf16"), or None."""
    value = getattr(trainer, "precision", None)
    if value is None:
        return None
    return _PRECISIONS.get(str(value).strip().lower())


def _as_float(value: Any) -> Optional[float]:
    if value is None:
        return None
    try:
        if hasattr(value, "item"):
            value = value.item()
        return float(value)
    except (TypeError, ValueError):
        return None


def throughput_metric(metrics: Mapping[str, Any], name: str) -> Any:
    """The per-device training metric `name` ("flops_per_sec", "mfu") that Lightning's
    ThroughputMonitor logged, or None.

    Lightning 2.0 logs it as "device/<name>"; from 2.1 on, `Throughput.compute()` keys are
    prefixed with the running stage: "train/device/<name>", with the monitor's `separator`
    ("/" by default, e.g. "train|device|<name>"). Validation and test stages are not training
    throughput and are skipped.
    """
    for key, value in metrics.items():
        parts = [p for p in key.replace("|", "/").split("/") if p]
        if parts in (["device", name], ["train", "device", name]):
            return value
    return None


class GoodputCallback(_CallbackBase):
    """Reports throughput every `every_n_steps` optimizer steps from global rank 0."""

    def __init__(self,
                 flops_per_step: Optional[FlopsSource] = None,
                 *,
                 tokens_per_step: Optional[float] = None,
                 every_n_steps: int = 50,
                 reporter: Optional[Reporter] = None,
                 precision: Optional[str] = None,
                 flush_timeout_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic,
                 **reporter_kwargs: Any):
        super().__init__()
        self._flops_per_step = flops_per_step
        self._tokens_per_step = tokens_per_step
        self._every_n_steps = max(1, int(every_n_steps))
        self._reporter = reporter
        self._owns_reporter = reporter is None
        self._precision = precision
        self._flush_timeout_s = flush_timeout_s
        self._clock = clock
        reporter_kwargs.setdefault("framework", "pytorch-lightning")
        reporter_kwargs.setdefault("framework_version", _LIGHTNING_VERSION)
        self._reporter_kwargs = reporter_kwargs
        self._window_start_s: Optional[float] = None
        self._window_start_step = 0

    @property
    def reporter(self) -> Optional[Reporter]:
        """The reporter in use (created at train start on rank 0 when none was given)."""
        return self._reporter

    # Lightning hooks ------------------------------------------------------------------

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if not getattr(trainer, "is_global_zero", True):
            return
        if self._reporter is None:
            self._reporter = Reporter(**self._reporter_kwargs)
        self._window_start_s = self._clock()
        self._window_start_step = int(getattr(trainer, "global_step", 0))

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int, *args: Any) -> None:
        if self._reporter is None or self._window_start_s is None:
            return
        step = int(getattr(trainer, "global_step", 0))
        steps = step - self._window_start_step
        if steps < self._every_n_steps:
            return
        now_s = self._clock()
        elapsed_s = now_s - self._window_start_s
        self._window_start_s = now_s
        self._window_start_step = step
        if elapsed_s <= 0:
            return
        self._report(trainer, pl_module, step, steps, elapsed_s)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self._reporter is None:
            return
        if self._owns_reporter:
            self._reporter.close(self._flush_timeout_s)
        else:
            self._reporter.flush(self._flush_timeout_s)

    # ----------------------------------------------------------------------------------

    def _report(self, trainer: Any, pl_module: Any, step: int, steps: int,
                elapsed_s: float) -> None:
        step_time_s = elapsed_s / steps
        common = dict(step=step, interval_s=elapsed_s,
                      precision=self._precision or precision_from_trainer(trainer))
        if self._tokens_per_step:
            common["tokens_per_s"] = float(self._tokens_per_step) / step_time_s
        flops = self._flops_per_step
        if callable(flops):
            try:
                flops = flops(trainer, pl_module)
            except Exception:  # noqa: BLE001 - a broken formula must not stop training
                flops = None
        flops = _as_float(flops)
        if flops:
            world_size = int(getattr(trainer, "world_size", 0) or 0)
            self._reporter.report(flops_per_step=flops, step_time_s=step_time_s,
                                  gpu_count=world_size or None, **common)
            return
        metrics = self._metrics(trainer)
        flops_per_s = _as_float(throughput_metric(metrics, "flops_per_sec"))
        if flops_per_s:
            self._reporter.report(tflops_per_gpu=flops_per_s / 1e12, **common)
            return
        mfu = _as_float(throughput_metric(metrics, "mfu"))
        if mfu:
            self._reporter.report(mfu=mfu, **common)

    @staticmethod
    def _metrics(trainer: Any) -> Mapping[str, Any]:
        merged = {}
        for name in ("logged_metrics", "callback_metrics"):
            values = getattr(trainer, name, None)
            if isinstance(values, Mapping):
                merged.update(values)
        return merged
