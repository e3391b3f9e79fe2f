# SPDX-License-Identifier: Apache-2.0
# Build-time check that the ibus binary still holds the function the
# consumer benchmark reads its "hot path" row from (IB_BENCH_HOT_PATH in
# CMakeLists.txt). callgrind_annotate names functions by their symbol, so
# a rename, or a function the compiler inlines away, would otherwise only
# show after a quarter-hour run, as a missing row.
#
#   cmake -DNM=<nm> -DBINARY=<ibus> -DSYMBOL=<function> -DSTAMP=<file> -P check_hot_path.cmake
execute_process(COMMAND "${NM}" "${BINARY}"
  OUTPUT_VARIABLE symbols ERROR_VARIABLE nm_error RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench: cannot list the symbols of ${BINARY}: ${nm_error}")
endif()
# "<address> T <name>": a global or a file-local function.
string(REGEX MATCH " [Tt] ${SYMBOL}\n" found "${symbols}")
if(NOT found)
  message(FATAL_ERROR
    "bench: ${BINARY} has no function ${SYMBOL}, the consumer benchmark's hot "
    "path. If it was renamed or split, set IB_BENCH_HOT_PATH in "
    "bench/consumer/CMakeLists.txt to the function that now runs one pulled "
    "batch (decode, dispatch, claim/mark, acks), and keep it out of line.")
endif()
file(TOUCH "${STAMP}")
