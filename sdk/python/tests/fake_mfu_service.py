"""An in-process MfuService for the SDK tests: stores reports, dedups by report_id, refuses
negative TFLOP/s the way the real service does, and can be told to fail calls."""

import threading
from concurrent import futures

import grpc

from goodput_sdk._proto import common_pb2, mfu_pb2, mfu_pb2_grpc


def refusal_reason(report):
    """Why the service would refuse `report`, or None."""
    if report.WhichOneof("measurement") is None:
        return "measurement", "", "report has no measurement"
    if report.WhichOneof("measurement") == "model_tflops_per_gpu" and \
            report.model_tflops_per_gpu <= 0:
        value = repr(report.model_tflops_per_gpu)
        return ("model_tflops_per_gpu", value,
                f"report {report.report_id}: model_tflops_per_gpu={value} is not > 0")
    return None


class FakeMfuService(mfu_pb2_grpc.MfuServiceServicer):

    def __init__(self, *, stream_unimplemented=False):
        self.lock = threading.Lock()
        self.reports = {}  # report_id -> MfuReport
        self.calls = 0
        self.fail_next = []  # status codes returned by the next calls, in order
        self.fail_after_store = []  # codes returned by the next calls after storing
        self.stream_unimplemented = stream_unimplemented
        self.metadata = []

    def _maybe_fail(self, context):
        with self.lock:
            self.calls += 1
            self.metadata.append(dict(context.invocation_metadata()))
            code = self.fail_next.pop(0) if self.fail_next else None
        if code is not None:
            context.abort(code, f"injected {code.name}")

    def _store(self, report):
        with self.lock:
            if report.report_id in self.reports:
                return True
            self.reports[report.report_id] = report
            return False

    def ReportMfu(self, request, context):
        self._maybe_fail(context)
        reason = refusal_reason(request.report)
        if reason is not None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, reason[2])
        duplicate = self._store(request.report)
        return mfu_pb2.ReportMfuResponse(report_id=request.report.report_id,
                                         duplicate=duplicate, job_registered=True)

    def StreamMfuReports(self, request_iterator, context):
        if self.stream_unimplemented:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "StreamMfuReports: not built yet")
        self._maybe_fail(context)
        response = mfu_pb2.StreamMfuReportsResponse()
        for batch in request_iterator:
            for index, report in enumerate(batch.reports):
                reason = refusal_reason(report)
                if reason is not None:
                    response.refused_count += 1
                    response.refusals.add(batch_id=batch.batch_id, index=index,
                                          item_id=report.report_id, field=reason[0],
                                          value=reason[1],
                                          code=common_pb2.REFUSAL_CODE_OUT_OF_RANGE,
                                          message=reason[2])
                elif self._store(report):
                    response.duplicate_count += 1
                else:
                    response.stored_count += 1
        with self.lock:
            code = self.fail_after_store.pop(0) if self.fail_after_store else None
        if code is not None:
            context.abort(code, f"injected {code.name} after storing")
        return response

    def report_list(self):
        with self.lock:
            return list(self.reports.values())


class ServerHandle:
    """A gRPC server with a FakeMfuService on 127.0.0.1:`port` (0: a free port)."""

    def __init__(self, port=0, server_credentials=None, **service_kwargs):
        self.service = FakeMfuService(**service_kwargs)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        mfu_pb2_grpc.add_MfuServiceServicer_to_server(self.service, self.server)
        if server_credentials is not None:
            self.port = self.server.add_secure_port(f"127.0.0.1:{port}", server_credentials)
        else:
            self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        if self.port == 0:
            raise RuntimeError(f"could not listen on 127.0.0.1:{port}")
        self.server.start()

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        self.server.stop(grace=None).wait()
