"""Follows a running Megatron-LM job's log and reports its throughput lines to goodput.

For jobs whose code cannot be changed. Megatron-LM (with --log-throughput) prints, once per
--log-interval iterations, a line such as

 [2025-01-07 10:12:01] iteration      100/   50000 | consumed samples: 51200 | elapsed time per
 iteration (ms): 1548.1 | throughput per GPU (TFLOP/s/GPU): 412.3 | learning rate: ...

(one line; fields separated by "|"; launchers may prefix a rank tag such as "[default0]:").
Each such line becomes one report: TFLOP/s per GPU, the iteration, and the interval the figure
averages over (iterations since the previous line x elapsed time per iteration).

    python3 -m goodput_sdk.megatron /path/to/train.log          # GOODPUT_* / Slurm env
"""

import argparse
import dataclasses
import logging
import math
import os
import re
import signal
import sys
import threading
from typing import Callable, List, Optional

from goodput_sdk._proto import mfu_pb2
from goodput_sdk.reporter import Reporter

_log = logging.getLogger("goodput_sdk")

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
_THROUGHPUT_RE = re.compile(
    r"(?:throughput|compute) per GPU \(TFLOP/s/GPU\):\s*" + _NUMBER, re.IGNORECASE)
_ITERATION_RE = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)")
_ELAPSED_RE = re.compile(r"elapsed time per iteration \(ms\):\s*" + _NUMBER)


@dataclasses.dataclass(frozen=True)
class ThroughputLine:
    """What one Megatron-LM log line says about throughput."""

    tflops_per_gpu: float
    iteration: Optional[int] = None
    train_iterations: Optional[int] = None
    elapsed_ms_per_iteration: Optional[float] = None


def parse_line(line: str) -> Optional[ThroughputLine]:
    """The throughput of a Megatron-LM training-log line, or None if the line has none (or a
    value that is not a finite number)."""
    m = _THROUGHPUT_RE.search(line)
    if not m:
        return None
    try:
        tflops = float(m.group(1))
    except ValueError:
        return None
    if not math.isfinite(tflops):
        return None
    iteration = train_iterations = None
    it = _ITERATION_RE.search(line)
    if it:
        iteration, train_iterations = int(it.group(1)), int(it.group(2))
    elapsed_ms = None
    el = _ELAPSED_RE.search(line)
    if el:
        try:
            value = float(el.group(1))
            elapsed_ms = value if math.isfinite(value) and value > 0 else None
        except ValueError:
            elapsed_ms = None
    return ThroughputLine(tflops, iteration, train_iterations, elapsed_ms)


class MegatronLogFollower:
    """Tails one log file (like `tail -F`) and reports every throughput line.

    Starts at the end of the file unless `from_start`; waits for a file that does not exist
    yet; starts over when the file is truncated or replaced. Call poll() repeatedly, or
    start()/stop() to poll from a background thread.
    """

    def __init__(self,
                 path: str,
                 reporter: Optional[Reporter] = None,
                 *,
                 from_start: bool = False,
                 poll_interval_s: float = 1.0,
                 precision: Optional[str] = None,
                 on_line: Optional[Callable[[ThroughputLine], None]] = None,
                 **reporter_kwargs):
        self._path = path
        if reporter is None:
            reporter_kwargs.setdefault("framework", "megatron-lm")
            reporter_kwargs.setdefault("source", mfu_pb2.MFU_REPORT_SOURCE_LOG)
            reporter = Reporter(**reporter_kwargs)
            self._owns_reporter = True
        else:
            self._owns_reporter = False
        self._reporter = reporter
        self._from_start = from_start
        self._poll_interval_s = poll_interval_s
        self._precision = precision
        self._on_line = on_line
        self._file = None
        self._inode = None
        self._partial = ""
        self._previous_iteration: Optional[int] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.lines_reported = 0

    @property
    def reporter(self) -> Reporter:
        return self._reporter

    def poll(self) -> int:
        """Reads what was appended since the last call; returns the number of reports made."""
        if not self._ensure_open():
            return 0
        reported = 0
        while True:
            chunk = self._file.read(1 << 16)
            if not chunk:
                break
            text = self._partial + chunk
            lines = text.split("\n")
            self._partial = lines.pop()  # an unfinished last line waits for its newline
            for line in lines:
                reported += self._handle(line)
        return reported

    def start(self) -> None:
        """Polls every `poll_interval_s` from a daemon thread until stop()."""
        self._thread = threading.Thread(target=self._loop, name="goodput-megatron-follower",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stops polling, reads what is left, and flushes (or closes its own) reporter."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        try:
            self.poll()
        finally:
            if self._file is not None:
                self._file.close()
                self._file = None
            if self._owns_reporter:
                self._reporter.close(timeout_s)
            else:
                self._reporter.flush(timeout_s)

    def run(self) -> None:
        """Polls until request_stop() is called (e.g. from a signal handler)."""
        self._loop()

    def request_stop(self) -> None:
        """Makes run() or the start() thread return after the current poll."""
        self._stop.set()

    # ----------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except OSError as e:
                _log.warning("goodput_sdk: reading %s: %s", self._path, e)
                self._close_file()
            self._stop.wait(self._poll_interval_s)

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None
        self._inode = None
        self._partial = ""

    def _ensure_open(self) -> bool:
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return self._file is not None
        if self._file is not None:
            replaced = st.st_ino != self._inode
            truncated = st.st_size < self._file.tell()
            if not replaced and not truncated:
                return True
            if replaced:
                self._read_rest_of_old_file()
            self._close_file()
            self._from_start = True  # a new or truncated file is read from its beginning
        self._file = open(self._path, "r", encoding="utf-8", errors="replace")
        self._inode = os.fstat(self._file.fileno()).st_ino
        if not self._from_start:
            self._file.seek(0, os.SEEK_END)
        self._from_start = True
        return True

    def _read_rest_of_old_file(self) -> None:
        rest = self._file.read()
        for line in (self._partial + rest).split("\n"):
            self._handle(line)
        self._partial = ""

    def _handle(self, line: str) -> int:
        parsed = parse_line(line)
        if parsed is None:
            return 0
        if self._on_line is not None:
            self._on_line(parsed)
        interval_s = None
        step_times: Optional[List[float]] = None
        if parsed.elapsed_ms_per_iteration is not None:
            step_s = parsed.elapsed_ms_per_iteration / 1000.0
            step_times = [step_s]
            iterations = 1
            if (parsed.iteration is not None and self._previous_iteration is not None
                    and parsed.iteration > self._previous_iteration):
                iterations = parsed.iteration - self._previous_iteration
            interval_s = step_s * iterations
        if parsed.iteration is not None:
            self._previous_iteration = parsed.iteration
        self._reporter.report(tflops_per_gpu=parsed.tflops_per_gpu, step=parsed.iteration,
                              interval_s=interval_s, step_times_s=step_times,
                              precision=self._precision)
        self.lines_reported += 1
        return 1


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m goodput_sdk.megatron",
        description="Report a running Megatron-LM job's throughput lines to goodput.")
    parser.add_argument("log", help="the job's log file (followed like tail -F)")
    parser.add_argument("--from-start", action="store_true",
                        help="also report lines already in the file")
    parser.add_argument("--endpoint", help="MfuService address (default: GOODPUT_ENDPOINT)")
    parser.add_argument("--job", help="job id (default: GOODPUT_JOB_ID, Slurm, Osmo)")
    parser.add_argument("--cluster", help="cluster (default: GOODPUT_CLUSTER, Slurm)")
    parser.add_argument("--precision", help="precision of the run, e.g. bf16 or fp8")
    parser.add_argument("--poll-interval-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    follower = MegatronLogFollower(args.log, from_start=args.from_start,
                                   poll_interval_s=args.poll_interval_s,
                                   precision=args.precision, endpoint=args.endpoint,
                                   job=args.job, cluster=args.cluster)
    if not follower.reporter.enabled:
        return 2
    signal.signal(signal.SIGTERM, lambda *_: follower.request_stop())
    signal.signal(signal.SIGINT, lambda *_: follower.request_stop())
    follower.run()
    follower.stop()
    stats = follower.reporter.stats()
    _log.info("goodput_sdk: %d lines reported; sent=%d refused=%d dropped=%d abandoned=%d",
              follower.lines_reported, stats.sent, stats.refused, stats.dropped,
              stats.abandoned)
    return 0


if __name__ == "__main__":
    sys.exit(main())
