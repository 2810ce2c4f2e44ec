#include "services/ingest/jobs_http.h"

#include "services/platform/status_convert.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/server_context.h"
#include "nlohmann/json.hpp"

namespace goodput::ingest {
namespace {

// What a client should wait before retrying a 429 or 503.
constexpr int kRetryAfterS = 5;

JsonHttpReply ErrorReply(grpc::StatusCode code, absl::string_view message) {
  JsonHttpReply reply;
  reply.status = HttpStatusForGrpc(code);
  // grpc::StatusCode and absl::StatusCode share their values.
  reply.body = JsonError(reply.status,
                         absl::StatusCodeToString(static_cast<absl::StatusCode>(code)), message);
  if (reply.status == 503 || reply.status == 429) reply.retry_after_s = kRetryAfterS;
  reply.www_authenticate = reply.status == 401;
  return reply;
}

// Parses `body` into `request` (unknown fields refused), runs `call`, answers its response.
template <typename Request, typename Response, typename Call>
JsonHttpReply Run(absl::string_view route, absl::string_view body, Call call) {
  Request request;
  google::protobuf::util::JsonParseOptions parse_options;
  parse_options.ignore_unknown_fields = false;
  const auto parsed =
      google::protobuf::util::JsonStringToMessage(std::string(body), &request, parse_options);
  if (!parsed.ok()) {
    return ErrorReply(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat(route, ": the body is not a valid ", Request::descriptor()->full_name(),
                     " in JSON: ", std::string(parsed.message())));
  }
  Response response;
  grpc::ServerContext context;
  grpc::Status status = call(&context, &request, &response);
  if (!status.ok()) return ErrorReply(status.error_code(), status.error_message());
  JsonHttpReply reply;
  google::protobuf::util::JsonPrintOptions print_options;
  const auto printed =
      google::protobuf::util::MessageToJsonString(response, &reply.body, print_options);
  if (!printed.ok()) {
    return ErrorReply(grpc::StatusCode::INTERNAL,
                      absl::StrCat("the response could not be printed as JSON: ",
                                   std::string(printed.message())));
  }
  reply.body.push_back('\n');
  return reply;
}

}  // namespace

int HttpStatusForGrpc(grpc::StatusCode code) {
  return platform::HttpStatusFor(static_cast<absl::StatusCode>(code));
}

std::string JsonError(int http_status, absl::string_view canonical_code,
                      absl::string_view message) {
  nlohmann::json error = {{"error",
                           {{"code", http_status},
                            {"status", std::string(canonical_code)},
                            {"message", std::string(message)}}}};
  // Messages quote user input, which need not be UTF-8: replace what is not.
  return error.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

JsonHttpReply JobsHttp::Handle(Method method, absl::string_view authorization,
                               absl::string_view body) const {
  const bool is_register = method == Method::kRegister;
  const absl::string_view route =
      is_register ? absl::string_view(kRegisterJobPath) : absl::string_view(kEndJobPath);
  platform::Identity caller;  // an unscoped operator when auth is off
  if (auth_ != nullptr) {
    // The gRPC method's own entry: the same roles, whichever way the call comes.
    const std::string grpc_method = absl::StrCat("/", v1::JobService::service_full_name(), "/",
                                                 is_register ? "RegisterJob" : "EndJob");
    platform::HttpRefusal refusal;
    absl::StatusOr<platform::Identity> identity =
        platform::CheckHttp(*auth_, grpc_method, authorization, &refusal);
    if (!identity.ok()) {
      const grpc::StatusCode code = refusal.status == 403 ? grpc::StatusCode::PERMISSION_DENIED
                                                          : grpc::StatusCode::UNAUTHENTICATED;
      return ErrorReply(code, absl::StrCat("POST ", route, ": ", refusal.message));
    }
    caller = *std::move(identity);
  }
  // The service holds the caller to its scope (cluster, user, team) exactly as over gRPC:
  // the in-process call carries the caller this request's token names.
  const platform::ScopedCaller in_process_caller(std::move(caller));
  const auto refused_in_scope = [route](grpc::Status status) {
    if (status.error_code() != grpc::StatusCode::PERMISSION_DENIED) return status;
    return grpc::Status(status.error_code(),
                        absl::StrCat("POST ", route, ": ", status.error_message()));
  };
  if (is_register) {
    return Run<v1::RegisterJobRequest, v1::RegisterJobResponse>(
        route, body, [this, &refused_in_scope](grpc::ServerContext* c, auto* req, auto* res) {
          return refused_in_scope(service_->RegisterJob(c, req, res));
        });
  }
  return Run<v1::EndJobRequest, v1::EndJobResponse>(
      route, body, [this, &refused_in_scope](grpc::ServerContext* c, auto* req, auto* res) {
        return refused_in_scope(service_->EndJob(c, req, res));
      });
}

}  // namespace goodput::ingest
