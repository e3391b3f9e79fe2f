# SPDX-License-Identifier: Apache-2.0
# Fuzz target for recorder URIs (recorders/uri.c). Seeds live in corpus/uri.
ib_add_fuzz_target(fuzz_recorder_uri
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/recorders/fuzz_recorder_uri.c
  LIBS ib_recorders
  CORPUS ${CMAKE_CURRENT_LIST_DIR}/corpus/uri
  ITERATIONS 100000)
target_include_directories(fuzz_recorder_uri PRIVATE ${PROJECT_SOURCE_DIR}/recorders)

# Fuzz target for the records of a partition's marker log
# (recorders/marker_log.c). Seeds live in corpus/marker_log.
ib_add_fuzz_target(fuzz_marker_log
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/recorders/fuzz_marker_log.c
  LIBS ib_recorders
  CORPUS ${CMAKE_CURRENT_LIST_DIR}/corpus/marker_log
  ITERATIONS 100000)
target_include_directories(fuzz_marker_log PRIVATE ${PROJECT_SOURCE_DIR}/recorders)

# Fuzz target for the values other tools can write into a partitioned
# consumer's bucket (leases, announcements). Seeds in corpus/fleet_values.
ib_add_fuzz_target(fuzz_fleet_values
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/recorders/fuzz_fleet_values.c
  LIBS ib_recorders
  CORPUS ${CMAKE_CURRENT_LIST_DIR}/corpus/fleet_values
  ITERATIONS 100000)
target_include_directories(fuzz_fleet_values PRIVATE ${PROJECT_SOURCE_DIR}/recorders)
