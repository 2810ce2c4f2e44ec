# Helpers that declare goodput's libraries, binaries and tests with one set of rules:
# warnings on (errors for our code), include root at the repository top, C++20.
#
#   goodput_library(NAME goodput_core SOURCES a.cc b.cc DEPS absl::status)
#   goodput_executable(NAME goodput-ingest SOURCES main.cc DEPS goodput_ingest)
#   goodput_test(NAME goodput_core_test SOURCES a_test.cc LABELS unit DEPS goodput_core)
#
# goodput_test with DISCOVER registers each TEST as its own ctest entry (unit tests);
# without it the binary is one ctest entry (integration binaries that start servers once).

function(goodput_compile_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
  if(GOODPUT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

function(goodput_library)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${ARG_NAME} STATIC ${ARG_SOURCES})
  goodput_compile_options(${ARG_NAME})
  target_link_libraries(${ARG_NAME} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

function(goodput_executable)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  goodput_compile_options(${ARG_NAME})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
endfunction()

function(goodput_test)
  if(NOT GOODPUT_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "DISCOVER" "NAME;TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  goodput_compile_options(${ARG_NAME})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  if(ARG_DISCOVER)
    gtest_discover_tests(${ARG_NAME}
      PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
      DISCOVERY_TIMEOUT 60)
  else()
    add_test(NAME ${ARG_NAME} COMMAND ${ARG_NAME} --gtest_color=no)
    set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
  endif()
endfunction()
