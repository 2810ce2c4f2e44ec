// Answers for RPCs that are declared in the API but not built yet: UNIMPLEMENTED with a
// message naming the method and the piece of work that will build it, so that a caller learns
// what is missing instead of getting an empty status. One helper per callback shape.
//
//   grpc::ServerUnaryReactor* GetJobOfu(grpc::CallbackServerContext* ctx, ...) override {
//     return FinishUnimplemented(ctx, "/goodput.v1.OfuService/GetJobOfu", kOfuWork);
//   }
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/server_callback.h"

namespace goodput::platform {

// The UNIMPLEMENTED status for `method`, naming `work` (the subject of the work item that
// builds it).
inline grpc::Status UnimplementedStatus(absl::string_view method, absl::string_view work) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      absl::StrCat(method, " is not built yet; it comes with \"", work, "\""));
}

// Unary RPCs.
inline grpc::ServerUnaryReactor* FinishUnimplemented(grpc::CallbackServerContext* context,
                                                     absl::string_view method,
                                                     absl::string_view work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(UnimplementedStatus(method, work));
  return reactor;
}

// Server-streaming RPCs: finishes before writing anything.
template <class Response>
grpc::ServerWriteReactor<Response>* UnimplementedWriter(absl::string_view method,
                                                        absl::string_view work) {
  class Reactor : public grpc::ServerWriteReactor<Response> {
   public:
    explicit Reactor(grpc::Status status) { this->Finish(std::move(status)); }
    void OnDone() override { delete this; }
  };
  return new Reactor(UnimplementedStatus(method, work));
}

// Client-streaming RPCs: finishes without reading the stream.
template <class Request>
grpc::ServerReadReactor<Request>* UnimplementedReader(absl::string_view method,
                                                      absl::string_view work) {
  class Reactor : public grpc::ServerReadReactor<Request> {
   public:
    explicit Reactor(grpc::Status status) { this->Finish(std::move(status)); }
    void OnDone() override { delete this; }
  };
  return new Reactor(UnimplementedStatus(method, work));
}

}  // namespace goodput::platform
