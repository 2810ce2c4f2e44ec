"""Reporter: sends a training job's own throughput/MFU figures to goodput's MfuService.

The training loop only ever enqueues: `report()` appends to a bounded in-memory queue and
returns at once, whether or not the service is reachable. A background daemon thread takes
reports off the queue, sends them in batches over `StreamMfuReports` (falling back to unary
`ReportMfu` where streaming is not served), retries transient failures with exponential
backoff and jitter, and keeps a batch until the service has answered for it. Every report
carries a unique `report_id`, so a batch retried after a lost answer is not counted twice.
Nothing raises into the caller: problems are counted in `stats()` and logged once.

    reporter = Reporter("mfu.example.org:7004", job="4211873", cluster="eos")
    for step in range(steps):
        train_step()
        reporter.report(tflops_per_gpu=412.0, step=step, precision_mix={"bf16": 0.8, "fp8": 0.2})
    reporter.close()          # also done at interpreter exit, with a time limit
"""

import atexit
import collections
import dataclasses
import logging
import math
import os
import random
import threading
import time
import uuid
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import grpc

from goodput_sdk import config as _config
from goodput_sdk._proto import common_pb2, mfu_pb2, mfu_pb2_grpc

_log = logging.getLogger("goodput_sdk")

# Codes after which the same request may succeed later. Everything else is permanent.
RETRYABLE_CODES = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.ABORTED,
})

_PRECISION_NAMES = {
    "fp64": common_pb2.PRECISION_FP64,
    "tf32": common_pb2.PRECISION_TF32,
    "fp16": common_pb2.PRECISION_FP16,
    "bf16": common_pb2.PRECISION_BF16,
    "fp8": common_pb2.PRECISION_FP8,
    "fp4": common_pb2.PRECISION_FP4,
    "int8": common_pb2.PRECISION_INT8,
}

_CHECKPOINTING_NAMES = {
    "none": mfu_pb2.ACTIVATION_CHECKPOINTING_NONE,
    "selective": mfu_pb2.ACTIVATION_CHECKPOINTING_SELECTIVE,
    "full": mfu_pb2.ACTIVATION_CHECKPOINTING_FULL,
}

PrecisionLike = Union[str, int]
PrecisionMix = Union[Mapping[PrecisionLike, float], Iterable[Tuple[PrecisionLike, float]]]


@dataclasses.dataclass(frozen=True)
class ReporterStats:
    """Counters of one Reporter since it was created.

    queued:     accepted by report() and not yet answered for (in the queue or in flight).
    sent:       acknowledged by the service (stored, or already stored: see `duplicates`).
    duplicates: part of `sent` that the service had stored before (a retried batch).
    dropped:    not accepted: queue full, reporter closed or not configured.
    invalid:    accepted but unusable (bad arguments, e.g. no measurement or an unknown
                precision); never sent.
    refused:    refused by the service as malformed (INVALID_ARGUMENT); never retried.
    failed:     given up because of a permanent error of the call (e.g. UNAUTHENTICATED).
    abandoned:  still unsent when close() or the exit flush ran out of time.
    retries:    calls repeated after a transient error.
    rpcs:       calls made.
    """

    queued: int
    sent: int
    duplicates: int
    dropped: int
    invalid: int
    refused: int
    failed: int
    abandoned: int
    retries: int
    rpcs: int


class _Backoff:
    """Exponential backoff with "equal jitter": half the delay fixed, half random."""

    def __init__(self, initial_s: float, max_s: float, rng: random.Random):
        self._initial_s = initial_s
        self._max_s = max_s
        self._rng = rng
        self._attempt = 0

    def next_delay_s(self) -> float:
        ceiling = min(self._max_s, self._initial_s * (2.0**min(self._attempt, 30)))
        self._attempt += 1
        return ceiling / 2.0 + self._rng.uniform(0.0, ceiling / 2.0)

    def reset(self) -> None:
        self._attempt = 0


class _Outcome:
    DONE = "done"
    RETRY = "retry"
    HALTED = "halted"


# Position of each field in a queued item; items are plain tuples so that report() stays cheap.
_T_NS, _MFU, _TFLOPS, _TOTAL, _GPUS, _FLOPS, _STEP_TIME, _STEP, _PREC, _MIX, _TOKENS, \
    _STEP_TIMES, _INTERVAL, _LABELS = range(14)


class Reporter:
    """Queues MFU reports of one job and delivers them from a background thread.

    Arguments left as None come from the environment (see goodput_sdk.config). A reporter
    without an endpoint or job id is disabled: it logs why once and drops every report.
    """

    def __init__(self,
                 endpoint: Optional[str] = None,
                 job: Optional[str] = None,
                 token: Optional[str] = None,
                 cluster: Optional[str] = None,
                 *,
                 framework: str = "",
                 framework_version: str = "",
                 flops_formula: str = "",
                 precision: Optional[PrecisionLike] = None,
                 precision_mix: Optional[PrecisionMix] = None,
                 activation_checkpointing: Optional[str] = None,
                 workload_fingerprint: str = "",
                 labels: Optional[Mapping[str, str]] = None,
                 source: int = mfu_pb2.MFU_REPORT_SOURCE_SDK,
                 queue_capacity: int = 10000,
                 batch_size: int = 500,
                 max_batches_per_call: int = 8,
                 flush_interval_s: float = 1.0,
                 initial_backoff_s: float = 0.1,
                 max_backoff_s: float = 30.0,
                 rpc_timeout_s: float = 10.0,
                 exit_flush_timeout_s: float = 5.0,
                 report_ranks: Optional[str] = None,
                 environ: Optional[Mapping[str, str]] = None):
        self._settings = _config.resolve(endpoint, job, token, cluster, environ)
        self._capacity = max(1, int(queue_capacity))
        self._batch_size = max(1, int(batch_size))
        self._max_per_call = self._batch_size * max(1, int(max_batches_per_call))
        self._flush_interval_s = max(0.001, float(flush_interval_s))
        self._initial_backoff_s = max(0.001, float(initial_backoff_s))
        self._max_backoff_s = max(self._initial_backoff_s, float(max_backoff_s))
        self._rpc_timeout_s = float(rpc_timeout_s)
        self._exit_flush_timeout_s = float(exit_flush_timeout_s)
        self._source = source
        self._start_ns = time.time_ns()
        self._previous_end_ns = self._start_ns
        self._reporter_id = uuid.uuid4().hex[:12]
        self._batch_seq = 0

        self._queue: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._progress = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._halt = threading.Event()
        self._in_flight = 0
        self._closed = False
        self._closing = False
        self._future = None
        self._logged: set = set()
        self._counts = collections.Counter()
        self._use_stream = True
        self._channel = None
        self._thread = None

        self._enabled = False
        self._template = None
        try:
            self._template = self._make_template(framework, framework_version, flops_formula,
                                                 precision, precision_mix,
                                                 activation_checkpointing,
                                                 workload_fingerprint, labels)
            self._target = self._check_settings()
            self._tls_files = _config.tls_file_contents(self._settings)
        except ValueError as e:
            self._log_once("config", logging.WARNING,
                           "goodput_sdk: reporting disabled: %s", e)
            return
        try:
            reports, why_not = _config.should_report(
                report_ranks, os.environ if environ is None else environ)
        except ValueError as e:
            self._log_once("config", logging.WARNING, "goodput_sdk: reporting disabled: %s", e)
            return
        if not reports:
            # One report per job, not one per rank: the other ranks stay silent.
            self._log_once("rank", logging.INFO, "goodput_sdk: not reporting: %s", why_not)
            return
        self._metadata = ((("authorization", "Bearer " + self._settings.token),)
                          if self._settings.token else ())
        self._enabled = True
        self._thread = threading.Thread(target=self._run, name="goodput-sdk-reporter",
                                        daemon=True)
        self._thread.start()
        atexit.register(self._close_at_exit)

    # -- public API -----------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """False when the reporter is not configured (no endpoint or job) or is closed."""
        return self._enabled and not self._closed

    @property
    def job(self) -> Tuple[str, str]:
        """(cluster, job_id) the reports are sent for."""
        return (self._settings.cluster, self._settings.job_id)

    def report(self,
               *,
               mfu: Optional[float] = None,
               tflops_per_gpu: Optional[float] = None,
               total_tflops: Optional[float] = None,
               gpu_count: Optional[int] = None,
               flops_per_step: Optional[float] = None,
               step_time_s: Optional[float] = None,
               step: Optional[int] = None,
               precision: Optional[PrecisionLike] = None,
               precision_mix: Optional[PrecisionMix] = None,
               tokens_per_s: Optional[float] = None,
               step_times_s: Optional[Sequence[float]] = None,
               interval_s: Optional[float] = None,
               labels: Optional[Mapping[str, str]] = None) -> bool:
        """Queues one report and returns at once; never blocks on I/O and never raises.

        Give exactly one measurement: `mfu` (fraction), `tflops_per_gpu`, `total_tflops` with
        `gpu_count`, or `flops_per_step` with `step_time_s` (`gpu_count` optional). The report
        covers `interval_s` seconds up to now, by default the time since the previous report.
        Returns False when the report was dropped (queue full, closed or not configured).
        """
        try:
            queue = self._queue
            if len(queue) >= self._capacity or not self._enabled or self._closed:
                with self._lock:
                    self._counts["dropped"] += 1
                return False
            queue.append((time.time_ns(), mfu, tflops_per_gpu, total_tflops, gpu_count,
                          flops_per_step, step_time_s, step, precision,
                          precision_mix if precision_mix is None else list(
                              precision_mix.items()
                              if isinstance(precision_mix, Mapping) else precision_mix),
                          tokens_per_s, None if step_times_s is None else list(step_times_s),
                          interval_s, None if labels is None else dict(labels)))
            if len(queue) >= self._batch_size and not self._wake.is_set():
                self._wake.set()
            return True
        except Exception:  # noqa: BLE001 - the training loop must never see an exception
            with self._lock:
                self._counts["invalid"] += 1
            return False

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Waits until every report accepted so far has been answered for, or `timeout_s`
        passes. True when nothing is left queued or in flight."""
        if not self._enabled:
            return True
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._progress:
            while self._queue or self._in_flight:
                if not self._thread.is_alive():
                    return False
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._wake.set()
                self._progress.wait(min(remaining, 0.5))
            return True

    def close(self, timeout_s: float = 5.0) -> bool:
        """Stops accepting reports, delivers what is queued for at most `timeout_s`, stops the
        sender. Reports still unsent then are counted as `abandoned`. Idempotent."""
        with self._lock:
            if self._closed:
                return not self._counts["abandoned"]
            self._closed = True
        if not self._enabled:
            return True
        try:
            atexit.unregister(self._close_at_exit)
        except Exception:  # noqa: BLE001
            pass
        delivered = self.flush(timeout_s)
        with self._lock:
            self._closing = True
            if not delivered:
                abandoned = len(self._queue) + self._in_flight
                self._counts["abandoned"] += abandoned
                self._queue.clear()
                self._in_flight = 0
                self._halt.set()
                if self._future is not None:
                    self._future.cancel()
        self._wake.set()
        self._thread.join(timeout=1.0 if delivered else 0.5)
        if not delivered:
            _log.warning("goodput_sdk: %d reports for job %s/%s not delivered within %.1f s",
                         self._counts["abandoned"], self._settings.cluster,
                         self._settings.job_id, timeout_s)
        return delivered

    def stats(self) -> ReporterStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            c = self._counts
            return ReporterStats(queued=len(self._queue) + self._in_flight,
                                 sent=c["sent"],
                                 duplicates=c["duplicates"],
                                 dropped=c["dropped"],
                                 invalid=c["invalid"],
                                 refused=c["refused"],
                                 failed=c["failed"],
                                 abandoned=c["abandoned"],
                                 retries=c["retries"],
                                 rpcs=c["rpcs"])

    def __enter__(self) -> "Reporter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close(self._exit_flush_timeout_s)

    # -- configuration --------------------------------------------------------------------

    def _check_settings(self) -> "_config.Target":
        s = self._settings
        if not s.endpoint:
            raise ValueError(f"no endpoint: pass endpoint= or set {_config.ENDPOINT_ENV}")
        if not s.job_id:
            raise ValueError(f"no job id: pass job= or set {_config.JOB_ID_ENV} (Slurm and "
                             "Osmo jobs set theirs automatically)")
        return _config.parse_endpoint(s.endpoint)

    def _make_template(self, framework, framework_version, flops_formula, precision,
                       precision_mix, activation_checkpointing, workload_fingerprint,
                       labels) -> "mfu_pb2.MfuReport":
        t = mfu_pb2.MfuReport()
        t.job.cluster = self._settings.cluster
        t.job.job_id = self._settings.job_id
        t.framework = framework
        t.framework_version = framework_version
        t.flops_formula = flops_formula
        t.workload_fingerprint = workload_fingerprint
        t.source = self._source
        if precision is not None:
            t.precision = _precision_value(precision)
        if precision_mix is not None:
            _fill_mix(t, precision_mix)
        if activation_checkpointing is not None:
            key = str(activation_checkpointing).strip().lower()
            if key not in _CHECKPOINTING_NAMES:
                raise ValueError(f"activation_checkpointing={activation_checkpointing!r} is not "
                                 "one of none, selective, full")
            t.activation_checkpointing = _CHECKPOINTING_NAMES[key]
        for k, v in (labels or {}).items():
            t.labels[str(k)] = str(v)
        return t

    # -- background sender ----------------------------------------------------------------

    def _close_at_exit(self) -> None:
        self.close(self._exit_flush_timeout_s)

    def _log_once(self, key: str, level: int, msg: str, *args: Any) -> None:
        if key in self._logged:
            _log.debug(msg, *args)
            return
        self._logged.add(key)
        _log.log(level, msg, *args)

    def _channel_and_stub(self):
        if self._channel is None:
            options = [
                ("grpc.initial_reconnect_backoff_ms", int(self._initial_backoff_s * 1000) + 1),
                ("grpc.min_reconnect_backoff_ms", int(self._initial_backoff_s * 1000) + 1),
                ("grpc.max_reconnect_backoff_ms", int(self._max_backoff_s * 1000) + 1),
                ("grpc.enable_retries", 0),
            ]
            if self._target.tls:
                root, key, chain = self._tls_files
                self._channel = grpc.secure_channel(
                    self._target.address,
                    grpc.ssl_channel_credentials(root_certificates=root, private_key=key,
                                                 certificate_chain=chain), options)
            else:
                self._channel = grpc.insecure_channel(self._target.address, options)
            self._stub = mfu_pb2_grpc.MfuServiceStub(self._channel)
        return self._stub

    def _run(self) -> None:
        backoff = _Backoff(self._initial_backoff_s, self._max_backoff_s, random.Random())
        pending: List[mfu_pb2.MfuReport] = []
        try:
            while not self._halt.is_set():
                if not pending:
                    self._wake.wait(self._flush_interval_s)
                    self._wake.clear()
                    pending = self._take()
                    if not pending:
                        with self._progress:
                            self._progress.notify_all()
                            if self._closing:
                                break
                        continue
                outcome, pending = self._send(pending)
                if outcome == _Outcome.HALTED:
                    break
                if outcome == _Outcome.RETRY:
                    with self._lock:
                        self._counts["retries"] += 1
                    self._halt.wait(backoff.next_delay_s())
                    continue
                backoff.reset()
                with self._progress:
                    self._in_flight = len(pending)
                    self._progress.notify_all()
                if self._queue:
                    self._wake.set()
        except Exception as e:  # noqa: BLE001 - log, never propagate into the process
            _log.error("goodput_sdk: reporter thread stopped: %r", e)
        finally:
            with self._progress:
                self._progress.notify_all()
            if self._channel is not None:
                self._channel.close()

    def _take(self) -> List["mfu_pb2.MfuReport"]:
        """Moves up to one call's worth of items off the queue and converts them."""
        with self._lock:
            items = []
            queue = self._queue
            while queue and len(items) < self._max_per_call:
                items.append(queue.popleft())
            self._in_flight = len(items)
        reports = []
        invalid = 0
        for item in items:
            try:
                reports.append(self._to_proto(item))
            except (ValueError, TypeError) as e:
                invalid += 1
                self._log_once("invalid:" + type(e).__name__ + str(e).split("=")[0],
                               logging.WARNING, "goodput_sdk: report not sent: %s", e)
        if invalid:
            with self._lock:
                self._counts["invalid"] += invalid
                self._in_flight = len(reports)
        return reports

    def _to_proto(self, item: tuple) -> "mfu_pb2.MfuReport":
        r = mfu_pb2.MfuReport()
        r.CopyFrom(self._template)
        r.report_id = str(uuid.uuid4())
        forms = []
        if item[_MFU] is not None:
            forms.append("mfu")
            r.mfu = float(item[_MFU])
        if item[_TFLOPS] is not None:
            forms.append("tflops_per_gpu")
            r.model_tflops_per_gpu = float(item[_TFLOPS])
        if item[_TOTAL] is not None:
            forms.append("total_tflops")
            if item[_GPUS] is None:
                raise ValueError("total_tflops needs gpu_count")
            r.total_throughput.total_tflops = float(item[_TOTAL])
            r.total_throughput.gpu_count = int(item[_GPUS])
        if item[_FLOPS] is not None:
            forms.append("flops_per_step")
            if item[_STEP_TIME] is None:
                raise ValueError("flops_per_step needs step_time_s")
            r.step_flops.flops_per_step = float(item[_FLOPS])
            r.step_flops.step_time_s = float(item[_STEP_TIME])
            if item[_GPUS] is not None:
                r.step_flops.gpu_count = int(item[_GPUS])
        if len(forms) != 1:
            raise ValueError(f"measurement={','.join(forms) or 'none'}: give exactly one of "
                             "mfu, tflops_per_gpu, total_tflops+gpu_count, "
                             "flops_per_step+step_time_s")
        if item[_STEP] is not None:
            r.step = int(item[_STEP])
        if item[_TOKENS] is not None:
            r.tokens_per_s = float(item[_TOKENS])
        if item[_STEP_TIMES] is not None:
            r.step_times_s.extend(float(v) for v in item[_STEP_TIMES][-1000:])
        if item[_PREC] is not None:
            r.precision = _precision_value(item[_PREC])
        if item[_MIX] is not None:
            del r.precision_mix[:]
            _fill_mix(r, item[_MIX])
        if item[_LABELS]:
            for k, v in item[_LABELS].items():
                r.labels[str(k)] = str(v)
        end_ns = item[_T_NS]
        if item[_INTERVAL] is not None and math.isfinite(item[_INTERVAL]) and item[_INTERVAL] > 0:
            start_ns = end_ns - int(item[_INTERVAL] * 1e9)
        elif (item[_STEP_TIME] is not None and self._previous_end_ns == self._start_ns
              and 0 < float(item[_STEP_TIME]) < 1e6):
            start_ns = end_ns - int(float(item[_STEP_TIME]) * 1e9)
        else:
            start_ns = self._previous_end_ns
        if start_ns >= end_ns:
            start_ns = end_ns - 1000
        self._previous_end_ns = max(self._previous_end_ns, end_ns)
        r.interval.start_time.FromNanoseconds(start_ns)
        r.interval.end_time.FromNanoseconds(end_ns)
        return r

    def _send(self, pending: List["mfu_pb2.MfuReport"]):
        """One delivery attempt. Returns (outcome, reports still to send)."""
        if self._use_stream:
            outcome = self._send_stream(pending)
            if outcome is not None:
                return outcome, ([] if outcome == _Outcome.DONE else pending)
        return self._send_unary(pending)

    def _call(self, method, request, timeout_s):
        with self._lock:
            if self._halt.is_set():
                return None, None
            self._counts["rpcs"] += 1
            future = method.future(request, timeout=timeout_s, metadata=self._metadata)
            self._future = future
        try:
            return future.result(), None
        except grpc.FutureCancelledError:
            return None, grpc.StatusCode.CANCELLED
        except grpc.RpcError as e:
            return None, e
        finally:
            with self._lock:
                self._future = None

    def _send_stream(self, pending):
        """Returns an outcome, or None to fall back to unary calls for these reports."""
        stub = self._channel_and_stub()
        requests = []
        for i in range(0, len(pending), self._batch_size):
            self._batch_seq += 1
            requests.append(
                mfu_pb2.StreamMfuReportsRequest(batch_id=f"{self._reporter_id}-{self._batch_seq}",
                                                reports=pending[i:i + self._batch_size]))
        response, error = self._call(stub.StreamMfuReports, iter(requests), self._rpc_timeout_s)
        if response is None and error is None:
            return _Outcome.HALTED
        if error is not None:
            code = error if isinstance(error, grpc.StatusCode) else error.code()
            if self._halt.is_set():
                return _Outcome.HALTED
            if code in RETRYABLE_CODES:
                self._log_once("retry:" + code.name, logging.INFO,
                               "goodput_sdk: %s unreachable (%s), retrying with backoff",
                               self._settings.endpoint, code.name)
                return _Outcome.RETRY
            if code == grpc.StatusCode.UNIMPLEMENTED:
                self._use_stream = False
                return None
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                # The call as a whole could not be read: isolate the bad report(s).
                return None
            self._give_up(len(pending), code, _details(error))
            return _Outcome.DONE
        with self._lock:
            self._counts["sent"] += response.stored_count + response.duplicate_count
            self._counts["duplicates"] += response.duplicate_count
            self._counts["refused"] += response.refused_count
        if response.refused_count:
            first = response.refusals[0].message if response.refusals else "no reason given"
            self._log_once("refused", logging.WARNING,
                           "goodput_sdk: the service refused %d report(s), e.g.: %s",
                           response.refused_count, first)
        return _Outcome.DONE

    def _send_unary(self, pending):
        stub = self._channel_and_stub()
        for i, report in enumerate(pending):
            response, error = self._call(stub.ReportMfu, mfu_pb2.ReportMfuRequest(report=report),
                                         self._rpc_timeout_s)
            if response is None and error is None:
                return _Outcome.HALTED, pending[i:]
            if error is None:
                with self._lock:
                    self._counts["sent"] += 1
                    self._counts["duplicates"] += int(response.duplicate)
                    self._in_flight = len(pending) - i - 1
                continue
            code = error if isinstance(error, grpc.StatusCode) else error.code()
            if self._halt.is_set():
                return _Outcome.HALTED, pending[i:]
            if code in RETRYABLE_CODES:
                return _Outcome.RETRY, pending[i:]
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                with self._lock:
                    self._counts["refused"] += 1
                    self._in_flight = len(pending) - i - 1
                self._log_once("refused", logging.WARNING,
                               "goodput_sdk: the service refused a report: %s",
                               _details(error))
                continue
            self._give_up(len(pending) - i, code, _details(error))
            return _Outcome.DONE, []
        return _Outcome.DONE, []

    def _give_up(self, count: int, code: "grpc.StatusCode", details: str) -> None:
        with self._lock:
            self._counts["failed"] += count
        self._log_once("failed:" + code.name, logging.WARNING,
                       "goodput_sdk: %d report(s) not delivered to %s: %s: %s%s", count,
                       self._settings.endpoint, code.name, details,
                       " (check GOODPUT_TOKEN)" if code in (
                           grpc.StatusCode.UNAUTHENTICATED,
                           grpc.StatusCode.PERMISSION_DENIED) else "")


def _details(error) -> str:
    try:
        return error.details() or ""
    except Exception:  # noqa: BLE001
        return ""


def _precision_value(value: PrecisionLike) -> int:
    """"bf16", "BF16", "PRECISION_BF16" or a goodput.v1.Precision number -> the enum value."""
    if isinstance(value, bool):
        raise ValueError(f"precision={value!r} is not a precision")
    if isinstance(value, int):
        if value <= 0 or value not in common_pb2.Precision.values():
            raise ValueError(f"precision={value!r} is not a known goodput.v1.Precision")
        return value
    key = str(value).strip().lower()
    if key.startswith("precision_"):
        key = key[len("precision_"):]
    if key not in _PRECISION_NAMES:
        raise ValueError(f"precision={value!r} is not one of {', '.join(_PRECISION_NAMES)}")
    return _PRECISION_NAMES[key]


def _fill_mix(report: "mfu_pb2.MfuReport", mix: PrecisionMix) -> None:
    pairs = mix.items() if isinstance(mix, Mapping) else mix
    for precision, share in pairs:
        report.precision_mix.add(precision=_precision_value(precision), flops_share=float(share))
