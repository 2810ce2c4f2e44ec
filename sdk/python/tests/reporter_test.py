import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import grpc

from fake_mfu_service import ServerHandle
from goodput_sdk import Reporter
from goodput_sdk import config
from goodput_sdk._proto import common_pb2, mfu_pb2

FAST = dict(initial_backoff_s=0.02, max_backoff_s=0.2, flush_interval_s=0.05, rpc_timeout_s=5)


def free_port_without_server():
    server = ServerHandle()
    port = server.port
    server.stop()
    return port


class ReporterTest(unittest.TestCase):

    def setUp(self):
        self.server = ServerHandle()
        self.addCleanup(self.server.stop)

    def reporter(self, **kwargs):
        args = dict(endpoint=self.server.endpoint, job="4211873", cluster="eos", token="",
                    environ={})
        args.update(FAST)
        args.update(kwargs)
        r = Reporter(**args)
        self.addCleanup(r.close, 0.5)
        return r

    def test_reports_land_with_their_fields(self):
        r = self.reporter(token="sdk-secret", framework="nemo", framework_version="2.0",
                          activation_checkpointing="selective", labels={"model": "llama"})
        self.assertTrue(r.report(tflops_per_gpu=412.5, step=100,
                                 precision_mix={"bf16": 0.75, "fp8": 0.25}, tokens_per_s=9e5))
        self.assertTrue(r.report(total_tflops=3300.0, gpu_count=8, step=101, precision="fp8"))
        self.assertTrue(r.report(flops_per_step=4.2e15, step_time_s=1.5, gpu_count=8))
        self.assertTrue(r.report(mfu=0.41, step_times_s=[1.0, 1.1], interval_s=2.1))
        self.assertTrue(r.flush(10))

        reports = sorted(self.server.service.report_list(), key=lambda x: x.interval.end_time
                         .ToNanoseconds())
        self.assertEqual(len(reports), 4)
        self.assertEqual(len({x.report_id for x in reports}), 4)
        for x in reports:
            self.assertEqual((x.job.cluster, x.job.job_id), ("eos", "4211873"))
            self.assertEqual(x.framework, "nemo")
            self.assertEqual(x.framework_version, "2.0")
            self.assertEqual(x.source, mfu_pb2.MFU_REPORT_SOURCE_SDK)
            self.assertEqual(x.activation_checkpointing, mfu_pb2.ACTIVATION_CHECKPOINTING_SELECTIVE)
            self.assertEqual(x.labels["model"], "llama")
            self.assertLess(x.interval.start_time.ToNanoseconds(),
                            x.interval.end_time.ToNanoseconds())
        a, b, c, d = reports
        self.assertEqual(a.model_tflops_per_gpu, 412.5)
        self.assertEqual(a.step, 100)
        self.assertEqual(a.tokens_per_s, 9e5)
        self.assertEqual([(s.precision, s.flops_share) for s in a.precision_mix],
                         [(common_pb2.PRECISION_BF16, 0.75), (common_pb2.PRECISION_FP8, 0.25)])
        self.assertEqual((b.total_throughput.total_tflops, b.total_throughput.gpu_count),
                         (3300.0, 8))
        self.assertEqual(b.precision, common_pb2.PRECISION_FP8)
        self.assertEqual((c.step_flops.flops_per_step, c.step_flops.step_time_s,
                          c.step_flops.gpu_count), (4.2e15, 1.5, 8))
        self.assertFalse(c.HasField("step"))
        self.assertEqual(d.mfu, 0.41)
        self.assertEqual(list(d.step_times_s), [1.0, 1.1])
        self.assertEqual(d.interval.end_time.ToNanoseconds() - d.interval.start_time.ToNanoseconds(),
                         2_100_000_000)
        # Consecutive reports cover consecutive intervals.
        self.assertEqual(b.interval.start_time, a.interval.end_time)
        self.assertEqual(self.server.service.metadata[0].get("authorization"),
                         "Bearer sdk-secret")
        stats = r.stats()
        self.assertEqual((stats.sent, stats.queued, stats.dropped, stats.refused), (4, 0, 0, 0))

    def test_service_down_does_not_block_and_loses_nothing_once_it_returns(self):
        self.server.stop()
        port = free_port_without_server()
        r = self.reporter(endpoint=f"127.0.0.1:{port}", queue_capacity=10000)
        start = time.perf_counter()
        for step in range(10000):
            r.report(tflops_per_gpu=400.0, step=step)
        elapsed_s = time.perf_counter() - start
        print(f"\n10,000 report() calls with the service down: {elapsed_s * 1e3:.1f} ms total "
              f"({elapsed_s * 1e6 / 10000:.2f} us per call)", file=sys.stderr)
        # The bound is "a few milliseconds"; the assertion is generous for loaded CI.
        self.assertLess(elapsed_s, 1.0)
        self.assertEqual(r.stats().dropped, 0)

        deadline = time.monotonic() + 10
        while r.stats().retries == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertGreater(r.stats().retries, 0)

        self.server = ServerHandle(port=port)
        self.addCleanup(self.server.stop)
        self.assertTrue(r.flush(30), r.stats())
        reports = self.server.service.report_list()
        self.assertEqual(len(reports), 10000)
        self.assertEqual(sorted(x.step for x in reports), list(range(10000)))
        stats = r.stats()
        self.assertEqual((stats.sent, stats.dropped, stats.queued), (10000, 0, 0))

    def test_full_queue_drops_and_counts(self):
        # A long flush interval and a large batch keep the sender from draining the queue.
        r = self.reporter(queue_capacity=5, batch_size=100, flush_interval_s=60)
        accepted = [r.report(mfu=0.4) for _ in range(8)]
        self.assertEqual(accepted, [True] * 5 + [False] * 3)
        stats = r.stats()
        self.assertEqual((stats.dropped, stats.queued), (3, 5))
        self.assertTrue(r.flush(10))
        self.assertEqual(r.stats().sent, 5)

    def test_close_gives_up_after_its_time_limit_and_counts_abandoned(self):
        port = free_port_without_server()
        r = self.reporter(endpoint=f"127.0.0.1:{port}")
        for _ in range(3):
            r.report(mfu=0.4)
        self.assertFalse(r.close(0.2))
        stats = r.stats()
        self.assertEqual((stats.abandoned, stats.queued, stats.sent), (3, 0, 0))

    def test_refused_reports_are_counted_and_not_retried(self):
        r = self.reporter()
        r.report(tflops_per_gpu=-5.0)
        r.report(tflops_per_gpu=300.0)
        self.assertTrue(r.flush(10))
        stats = r.stats()
        self.assertEqual((stats.sent, stats.refused, stats.retries), (1, 1, 0))
        self.assertEqual(len(self.server.service.report_list()), 1)

    def test_falls_back_to_unary_calls_when_streaming_is_not_served(self):
        self.server.stop()
        self.server = ServerHandle(stream_unimplemented=True)
        self.addCleanup(self.server.stop)
        r = self.reporter()
        r.report(tflops_per_gpu=-5.0)
        r.report(tflops_per_gpu=300.0)
        r.report(mfu=0.3)
        self.assertTrue(r.flush(10))
        stats = r.stats()
        self.assertEqual((stats.sent, stats.refused), (2, 1))
        self.assertEqual(len(self.server.service.report_list()), 2)

    def test_transient_errors_are_retried(self):
        self.server.service.fail_next = [grpc.StatusCode.UNAVAILABLE,
                                         grpc.StatusCode.RESOURCE_EXHAUSTED]
        r = self.reporter()
        for step in range(5):
            r.report(tflops_per_gpu=300.0, step=step)
        self.assertTrue(r.flush(10))
        self.assertEqual(len(self.server.service.report_list()), 5)
        self.assertGreaterEqual(r.stats().retries, 2)

    def test_a_retried_batch_is_not_counted_twice(self):
        # The service stores the batch but its answer is lost: the retry carries the same ids.
        self.server.service.fail_after_store = [grpc.StatusCode.DEADLINE_EXCEEDED]
        r = self.reporter()
        for step in range(5):
            r.report(tflops_per_gpu=300.0, step=step)
        self.assertTrue(r.flush(10))
        stats = r.stats()
        self.assertEqual(len(self.server.service.report_list()), 5)
        self.assertEqual((stats.sent, stats.duplicates, stats.retries), (5, 5, 1))

    def test_permanent_errors_give_up_without_retrying(self):
        self.server.service.fail_next = [grpc.StatusCode.PERMISSION_DENIED]
        r = self.reporter()
        r.report(mfu=0.4)
        r.report(mfu=0.5)
        self.assertTrue(r.flush(10))
        stats = r.stats()
        self.assertEqual((stats.failed, stats.retries, stats.sent), (2, 0, 0))

    def test_close_delivers_what_is_queued_and_then_refuses_new_reports(self):
        r = self.reporter(flush_interval_s=60)
        for _ in range(3):
            r.report(mfu=0.4)
        self.assertTrue(r.close(10))
        self.assertEqual(len(self.server.service.report_list()), 3)
        self.assertFalse(r.report(mfu=0.4))
        self.assertEqual(r.stats().dropped, 1)

    def test_only_rank_zero_reports_by_default(self):
        # torchrun sets RANK, srun SLURM_PROCID; rank 3 of a job stays silent unless asked.
        for env in ({"RANK": "3", "LOCAL_RANK": "3"}, {"SLURM_PROCID": "3"}):
            r = self.reporter(environ=env)
            self.assertFalse(r.enabled, env)
            self.assertFalse(r.report(mfu=0.4))
        self.assertTrue(self.reporter(environ={"RANK": "0", "SLURM_PROCID": "5"}).enabled)
        self.assertTrue(self.reporter(environ={"LOCAL_RANK": "0"}).enabled)  # no global rank
        self.assertTrue(self.reporter(environ={"RANK": "3"}, report_ranks="all").enabled)
        self.assertTrue(
            self.reporter(environ={"RANK": "8", "GOODPUT_REPORT_RANKS": "0,8"}).enabled)
        r = self.reporter(environ={"RANK": "8"}, report_ranks="0,8")
        self.assertTrue(r.report(mfu=0.4))
        self.assertTrue(r.flush(10))
        self.assertEqual(len(self.server.service.report_list()), 1)
        self.assertFalse(self.reporter(environ={"RANK": "1"}, report_ranks="zero").enabled)
        self.assertEqual(config.rank_from_environment({"LOCAL_RANK": "2"}), None)
        self.assertEqual(config.rank_from_environment({"PMI_RANK": "6"}), 6)

    def test_bad_arguments_are_counted_never_raised(self):
        r = self.reporter()
        self.assertTrue(r.report(step=3))                           # no measurement
        self.assertTrue(r.report(mfu=0.3, tflops_per_gpu=100.0))    # two measurements
        self.assertTrue(r.report(tflops_per_gpu=1.0, precision="fp7"))
        self.assertTrue(r.report(tflops_per_gpu="fast"))
        self.assertFalse(r.report(mfu=0.3, labels=5))               # rejected in report()
        self.assertTrue(r.report(mfu=0.3))
        self.assertTrue(r.flush(10))
        stats = r.stats()
        self.assertEqual((stats.invalid, stats.sent), (5, 1))

    def test_flushes_at_interpreter_exit(self):
        script = textwrap.dedent(f"""
            from goodput_sdk import Reporter
            r = Reporter("{self.server.endpoint}", job="7", cluster="eos", environ={{}},
                         flush_interval_s=60, exit_flush_timeout_s=10)
            for step in range(3):
                r.report(tflops_per_gpu=100.0, step=step)
        """)
        subprocess.run([sys.executable, "-c", script], check=True, timeout=60,
                       env=dict(os.environ))
        self.assertEqual(sorted(x.step for x in self.server.service.report_list()), [0, 1, 2])


class ConfigurationTest(unittest.TestCase):

    def test_unconfigured_reporter_is_disabled_and_harmless(self):
        r = Reporter(environ={})
        self.assertFalse(r.enabled)
        self.assertFalse(r.report(mfu=0.4))
        self.assertTrue(r.flush(0.1))
        self.assertEqual(r.stats().dropped, 1)
        r.close()

    def test_environment_supplies_what_arguments_leave_out(self):
        env = {"GOODPUT_ENDPOINT": "mfu:7004", "GOODPUT_TOKEN": "t", "SLURM_JOB_ID": "42",
               "SLURM_CLUSTER_NAME": "eos"}
        self.assertEqual(config.resolve(environ=env),
                         config.Settings(endpoint="mfu:7004", token="t", cluster="eos",
                                         job_id="42"))
        self.assertEqual(config.resolve(job="9", cluster="c", environ=env).job_id, "9")
        env["GOODPUT_JOB_ID"] = "explicit"
        env["GOODPUT_CLUSTER"] = "other"
        self.assertEqual(config.resolve(environ=env).job_id, "explicit")
        self.assertEqual(config.resolve(environ=env).cluster, "other")

    def test_job_id_of_slurm_array_tasks_and_osmo_workflows(self):
        self.assertEqual(config.job_id_from_environment(
            {"SLURM_JOB_ID": "4211880", "SLURM_ARRAY_JOB_ID": "4211873",
             "SLURM_ARRAY_TASK_ID": "7"}), "4211873_7")
        self.assertEqual(config.job_id_from_environment({"OSMO_WORKFLOW_ID": "train-3"}),
                         "train-3")
        self.assertEqual(config.job_id_from_environment({}), "")

    def test_endpoint_forms(self):
        self.assertEqual(config.parse_endpoint("mfu:7004"), config.Target("mfu:7004", False))
        self.assertEqual(config.parse_endpoint("http://mfu:7004/"),
                         config.Target("mfu:7004", False))
        self.assertEqual(config.parse_endpoint("https://goodput.example.org"),
                         config.Target("goodput.example.org:443", True))
        with self.assertRaisesRegex(ValueError, "endpoint='http://'"):
            config.parse_endpoint("http://")


if __name__ == "__main__":
    unittest.main()


def make_certificates(directory):
    """A CA "ca" signing "server" (localhost, 127.0.0.1), a CA "client-ca" signing "client":
    PEM files made with the openssl command line, as the C++ tests make theirs."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)
    ext = os.path.join(directory, "leaf.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                "extendedKeyUsage=serverAuth,clientAuth\n")
    for ca in ("ca", "client-ca"):
        run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-days", "2", "-subj", f"/CN=goodput-test-{ca}", "-keyout", f"{ca}.key", "-out",
            f"{ca}.crt")
    for ca, leaf in (("ca", "server"), ("client-ca", "client")):
        run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj",
            "/CN=localhost", "-keyout", f"{leaf}.key", "-out", f"{leaf}.csr")
        run("x509", "-req", "-in", f"{leaf}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", f"{leaf}.crt")
    return lambda name: os.path.join(directory, name)


class TlsReporterTest(unittest.TestCase):

    def setUp(self):
        directory = tempfile.mkdtemp(prefix="goodput-sdk-tls-")
        self.addCleanup(shutil.rmtree, directory, True)
        self.path = make_certificates(directory)

        def read(name):
            with open(self.path(name), "rb") as f:
                return f.read()
        credentials = grpc.ssl_server_credentials([(read("server.key"), read("server.crt"))],
                                                  root_certificates=read("client-ca.crt"),
                                                  require_client_auth=True)
        self.server = ServerHandle(server_credentials=credentials)
        self.addCleanup(self.server.stop)

    def reporter(self, environ):
        r = Reporter(endpoint=f"https://127.0.0.1:{self.server.port}", job="4211873",
                     cluster="eos", token="", environ=environ, **FAST)
        self.addCleanup(r.close, 0.5)
        return r

    def test_reports_over_mutual_tls_with_the_configured_ca_and_client_certificate(self):
        r = self.reporter({"GOODPUT_TLS_CA": self.path("ca.crt"),
                           "GOODPUT_TLS_CERT": self.path("client.crt"),
                           "GOODPUT_TLS_KEY": self.path("client.key")})
        self.assertTrue(r.report(mfu=0.41, interval_s=2.0))
        self.assertTrue(r.flush(10))
        self.assertEqual(len(self.server.service.report_list()), 1)

    def test_without_a_client_certificate_nothing_is_delivered(self):
        r = self.reporter({"GOODPUT_TLS_CA": self.path("ca.crt")})
        self.assertTrue(r.report(mfu=0.41, interval_s=2.0))
        self.assertFalse(r.flush(1))
        self.assertEqual(self.server.service.report_list(), [])

    def test_an_unreadable_tls_file_disables_reporting_naming_it(self):
        with self.assertLogs("goodput_sdk", level="WARNING") as logs:
            r = self.reporter({"GOODPUT_TLS_CA": self.path("missing.crt")})
        self.assertFalse(r.enabled)
        self.assertIn("GOODPUT_TLS_CA", "\n".join(logs.output))

