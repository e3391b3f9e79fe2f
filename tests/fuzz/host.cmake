# SPDX-License-Identifier: Apache-2.0
# Fuzz targets of the host's parsers.
ib_add_fuzz_target(fuzz_jsack
  SOURCES fuzz_jsack.c ${PROJECT_SOURCE_DIR}/plugin/nats/jsack.c
  LIBS ib_nats
  CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/jsack)
target_compile_options(fuzz_jsack PRIVATE -UNDEBUG)

ib_add_fuzz_target(fuzz_duration
  SOURCES fuzz_duration.c ${PROJECT_SOURCE_DIR}/plugin/cli/options.c
  LIBS ib_core
  CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/duration)
target_include_directories(fuzz_duration PRIVATE ${PROJECT_SOURCE_DIR}/plugin/cli)
target_compile_options(fuzz_duration PRIVATE -UNDEBUG)

# The http plugin's configuration, header-file and Retry-After parsers, and
# its JSON body.
ib_add_fuzz_target(fuzz_http_parse
  SOURCES fuzz_http_parse.c ${PROJECT_SOURCE_DIR}/plugin/examples/http/http_parse.c
          ${PROJECT_SOURCE_DIR}/plugin/examples/http/http_body.c
          ${PROJECT_SOURCE_DIR}/plugin/examples/http/http_json.c
          ${PROJECT_SOURCE_DIR}/core/redact.c
  LIBS ib_plugin_abi PkgConfig::JANSSON m
  CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/http)
target_include_directories(fuzz_http_parse PRIVATE ${PROJECT_SOURCE_DIR}/plugin/examples/http
                                                   ${PROJECT_SOURCE_DIR}/core)
target_compile_options(fuzz_http_parse PRIVATE -UNDEBUG)

# The dead-letter reader of ibus dlq with forged headers (issue 32): what it
# keeps, the replay target's precheck, and the printers.
ib_add_fuzz_target(fuzz_dlq_reader
  SOURCES fuzz_dlq_reader.c ${PROJECT_SOURCE_DIR}/plugin/cli/dlq_read.c
          ${PROJECT_SOURCE_DIR}/plugin/cli/dlq_target.c ${PROJECT_SOURCE_DIR}/plugin/cli/dlq_print.c
          ${PROJECT_SOURCE_DIR}/plugin/cli/options.c
  LIBS ib_nats PkgConfig::JANSSON
  CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/dlq
  ITERATIONS 50000)
target_include_directories(fuzz_dlq_reader PRIVATE ${PROJECT_SOURCE_DIR}/plugin/cli)
target_compile_options(fuzz_dlq_reader PRIVATE -UNDEBUG)
