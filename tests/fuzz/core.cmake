# SPDX-License-Identifier: Apache-2.0
# Fuzz targets for core: event decoding, id normalisation, the accepted id
# versions (ibus run --uuid-versions) and the W3C trace context parsers.
# Seeds live in corpus/event, corpus/id, corpus/id_versions and
# corpus/trace; fuzz_core_gen_corpus (not built by default)
# regenerates the committed ones.
ib_add_fuzz_target(fuzz_event_decode
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/core/fuzz_event_decode.c
  LIBS ib_core
  CORPUS ${CMAKE_CURRENT_LIST_DIR}/corpus/event
  ITERATIONS 100000)
ib_add_fuzz_target(fuzz_id_normalise
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/core/fuzz_id_normalise.c
  LIBS ib_core
  CORPUS ${CMAKE_CURRENT_LIST_DIR}/corpus/id
  ITERATIONS 200000)
ib_add_fuzz_target(fuzz_trace
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/core/fuzz_trace.c
  LIBS ib_core
  CORPUS ${CMAKE_CURRENT_LIST_DIR}/corpus/trace
  ITERATIONS 200000)

ib_add_fuzz_target(fuzz_id_versions
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/core/fuzz_id_versions.c
  LIBS ib_core
  CORPUS ${CMAKE_CURRENT_LIST_DIR}/corpus/id_versions
  ITERATIONS 100000)

add_executable(fuzz_core_gen_corpus EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/core/gen_corpus.c)
target_link_libraries(fuzz_core_gen_corpus PRIVATE ib_core)
# Partition subjects as a partition's owner reads them (core/partition.c).
ib_add_fuzz_target(fuzz_partition_subject
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/core/fuzz_partition_subject.c
  LIBS ib_core
  CORPUS ${CMAKE_CURRENT_LIST_DIR}/corpus/partition_subject
  ITERATIONS 100000)
