// HTTP/JSON for job registration, for callers that have curl and nothing else (the Slurm
// prolog and epilog in tools/slurm/): the body is the protobuf JSON of a JobService request,
// the answer the protobuf JSON of its response. The calls run the same JobServiceImpl code as
// gRPC (same validation, same store) and are authorized exactly as the gRPC methods are:
// through the AuthPolicy entry of "/goodput.v1.JobService/<Method>", i.e. the roles the
// method declares in job.proto (scheduler, operator).
//
//   POST /api/v1/jobs:register   RegisterJobRequest -> RegisterJobResponse
//   POST /api/v1/jobs:end        EndJobRequest      -> EndJobResponse
//
// Status codes: 200 done; 400 malformed JSON, an unknown field or INVALID_ARGUMENT (the body
// names the field); 401 (with WWW-Authenticate: Bearer) missing or unknown token; 403 role
// not allowed; 404 NOT_FOUND; 409 ALREADY_EXISTS or FAILED_PRECONDITION; 429
// RESOURCE_EXHAUSTED; 503 UNAVAILABLE (with Retry-After); 500 anything else. An error's body
// is {"error": {"code": <http status>, "status": "<canonical code>", "message": "..."}}.
//
//   JobsHttp jobs(&job_service, auth);  // auth may be null: no tokens needed
//   JsonHttpReply reply = jobs.Handle(JobsHttp::Method::kRegister, token_header, body);
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "goodput/v1/job.grpc.pb.h"
#include "grpcpp/support/status.h"
#include "services/platform/auth.h"

namespace goodput::ingest {

inline constexpr char kRegisterJobPath[] = "/api/v1/jobs:register";
inline constexpr char kEndJobPath[] = "/api/v1/jobs:end";
// Job requests are small; a body above this is refused (413) while it is read.
inline constexpr int64_t kDefaultJobsHttpMaxBodyBytes = 1 << 20;

struct JsonHttpReply {
  int status = 200;
  std::string body;               // JSON, newline-terminated
  int retry_after_s = 0;          // > 0: send Retry-After
  bool www_authenticate = false;  // send WWW-Authenticate: Bearer
};

// The HTTP status for a gRPC status code (see the table above).
int HttpStatusForGrpc(grpc::StatusCode code);

// {"error": {...}} for `status` answered with `http_status`.
std::string JsonError(int http_status, absl::string_view canonical_code, absl::string_view message);

class JobsHttp {
 public:
  enum class Method { kRegister, kEnd };

  // `service` and `auth` (null: auth off) must outlive this object.
  JobsHttp(v1::JobService::Service* service, const platform::AuthPolicy* auth)
      : service_(service), auth_(auth) {}

  // Handles one request: `authorization` is the Authorization header ("" when absent).
  JsonHttpReply Handle(Method method, absl::string_view authorization,
                       absl::string_view body) const;

 private:
  v1::JobService::Service* service_;
  const platform::AuthPolicy* auth_;
};

}  // namespace goodput::ingest
