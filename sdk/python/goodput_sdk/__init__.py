"""goodput SDK: a training job reports its own throughput/MFU to goodput's MfuService.

    from goodput_sdk import Reporter
    reporter = Reporter()                      # GOODPUT_ENDPOINT, GOODPUT_TOKEN, Slurm/Osmo job id
    reporter.report(tflops_per_gpu=412.0, step=step, precision="bf16")

Helpers: goodput_sdk.lightning.GoodputCallback (PyTorch Lightning) and
goodput_sdk.megatron.MegatronLogFollower (Megatron-LM logs of jobs that cannot be changed).
"""

from goodput_sdk.reporter import RETRYABLE_CODES, Reporter, ReporterStats

__all__ = ["RETRYABLE_CODES", "Reporter", "ReporterStats"]
__version__ = "0.1.0"
