# goodput_proto_library(NAME goodput_proto PROTOS a.proto b.proto [GRPC])
#
# Generates C++ protobuf (and, with GRPC, gRPC service) code for .proto files under
# proto/ into the build tree, keeping the import path rooted at proto/ so that
# `import "goodput/v1/common.proto";` and `#include "goodput/v1/common.pb.h"` work.
# Generated code is compiled without -Werror: it is not ours.
function(goodput_proto_library)
  cmake_parse_arguments(ARG "GRPC" "NAME" "PROTOS" ${ARGN})
  set(proto_root ${PROJECT_SOURCE_DIR}/proto)
  set(out_dir ${PROJECT_BINARY_DIR}/generated)
  file(MAKE_DIRECTORY ${out_dir})
  get_target_property(grpc_plugin gRPC::grpc_cpp_plugin LOCATION)
  set(srcs)
  foreach(proto ${ARG_PROTOS})
    get_filename_component(abs ${proto} ABSOLUTE)
    file(RELATIVE_PATH rel ${proto_root} ${abs})
    string(REGEX REPLACE "\\.proto$" "" stem ${rel})
    set(outs ${out_dir}/${stem}.pb.cc ${out_dir}/${stem}.pb.h)
    set(args --cpp_out=${out_dir})
    if(ARG_GRPC)
      list(APPEND outs ${out_dir}/${stem}.grpc.pb.cc ${out_dir}/${stem}.grpc.pb.h)
      list(APPEND args --grpc_out=${out_dir} --plugin=protoc-gen-grpc=${grpc_plugin})
    endif()
    add_custom_command(
      OUTPUT ${outs}
      COMMAND protobuf::protoc ARGS -I${proto_root} ${args} ${abs}
      DEPENDS ${abs} protobuf::protoc
      COMMENT "protoc ${rel}"
      VERBATIM)
    list(APPEND srcs ${outs})
  endforeach()
  add_library(${ARG_NAME} STATIC ${srcs})
  target_include_directories(${ARG_NAME} PUBLIC ${out_dir})
  target_link_libraries(${ARG_NAME} PUBLIC protobuf::libprotobuf)
  if(ARG_GRPC)
    target_link_libraries(${ARG_NAME} PUBLIC gRPC::grpc++)
  endif()
endfunction()
