# SPDX-License-Identifier: Apache-2.0
# Test registration helpers.
#
# ib_add_cmocka_test(<exe> SOURCES ... [LIBS ...] [LABEL unit] [NO_VALGRIND])
#   Builds a cmocka executable and registers every test it declares with
#   cmocka_unit_test*(name...) as its own ctest test "<exe>.<name>", so
#   `ctest -R <exe>.<name>` runs one. The executable takes the test name as
#   its first argument (tests/support/ib_test.h). Unless NO_VALGRIND, the
#   whole executable is also registered under valgrind (label "valgrind").
function(ib_add_cmocka_test exe)
  cmake_parse_arguments(T "NO_VALGRIND" "LABEL;TIMEOUT" "SOURCES;LIBS;ENV" ${ARGN})
  if(NOT T_LABEL)
    set(T_LABEL unit)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${exe} ${T_SOURCES})
  target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  target_link_libraries(${exe} PRIVATE ${T_LIBS} PkgConfig::CMOCKA Threads::Threads)
  set(names)
  foreach(src ${T_SOURCES})
    if(NOT IS_ABSOLUTE ${src})
      set(src ${CMAKE_CURRENT_SOURCE_DIR}/${src})
    endif()
    set(lines)
    file(STRINGS ${src} lines REGEX "cmocka_unit_test[a-z_]*\\(")
    # clang-format may put several on one line: take every one
    foreach(line ${lines})
      string(REGEX MATCHALL "cmocka_unit_test[a-z_]*\\([A-Za-z0-9_]+" found "${line}")
      foreach(m ${found})
        string(REGEX REPLACE "^cmocka_unit_test[a-z_]*\\(" "" n "${m}")
        list(APPEND names ${n})
      endforeach()
    endforeach()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
  endforeach()
  list(REMOVE_DUPLICATES names)
  if(NOT names)
    message(FATAL_ERROR "${exe}: no cmocka tests found in ${T_SOURCES}")
  endif()
  foreach(n ${names})
    add_test(NAME ${exe}.${n} COMMAND ${exe} ${n})
    set_tests_properties(${exe}.${n} PROPERTIES LABELS ${T_LABEL} TIMEOUT ${T_TIMEOUT}
                         ENVIRONMENT "IB_BUILD_DIR=${PROJECT_BINARY_DIR};IB_SOURCE_DIR=${PROJECT_SOURCE_DIR};${T_ENV}")
  endforeach()
  if(IB_VALGRIND AND IB_VALGRIND_EXE AND NOT IB_SANITIZE AND NOT T_NO_VALGRIND)
    add_test(NAME valgrind.${exe}
             COMMAND ${IB_VALGRIND_EXE} --quiet --error-exitcode=99 --leak-check=full
                     --errors-for-leak-kinds=definite,indirect --track-fds=no
                     --suppressions=${PROJECT_SOURCE_DIR}/tests/support/valgrind.supp
                     $<TARGET_FILE:${exe}>)
    set_tests_properties(valgrind.${exe} PROPERTIES LABELS "valgrind;${T_LABEL}" TIMEOUT 900
                         ENVIRONMENT "IB_UNDER_VALGRIND=1;IB_BUILD_DIR=${PROJECT_BINARY_DIR};IB_SOURCE_DIR=${PROJECT_SOURCE_DIR};${T_ENV}")
  endif()
endfunction()

# ib_add_fuzz_target(<name> SOURCES ... LIBS ... CORPUS <dir>)
#   A fuzz target defines LLVMFuzzerTestOneInput. With IB_LIBFUZZER it links
#   libFuzzer; otherwise it links tests/fuzz/replay_driver.c, which replays the
#   corpus and a fixed number of deterministic mutations of it; that run is a
#   ctest test labelled "fuzz".
function(ib_add_fuzz_target name)
  cmake_parse_arguments(F "" "CORPUS;ITERATIONS" "SOURCES;LIBS" ${ARGN})
  if(NOT F_ITERATIONS)
    set(F_ITERATIONS 200000)
  endif()
  if(IB_LIBFUZZER)
    add_executable(${name} ${F_SOURCES})
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  else()
    add_executable(${name} ${F_SOURCES} ${PROJECT_SOURCE_DIR}/tests/fuzz/replay_driver.c)
    add_test(NAME fuzz.${name} COMMAND ${name} ${F_CORPUS} ${F_ITERATIONS})
    set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz TIMEOUT 600)
  endif()
  target_link_libraries(${name} PRIVATE ${F_LIBS})
endfunction()

# ib_lock_timed_tests(<regex>)
#   The integration label runs two tests at a time (scripts/test.sh). Tests
#   whose verdict depends on how fast their processes run (kills planned
#   around a backlog, leases outrun by a pause, repeats per kill counted)
#   or that load both cores (compilers, clusters of servers) must not run
#   beside each other: every test of the current directory whose name
#   matches <regex> takes the resource lock "timed", so at most one of
#   them runs at a time, beside at most one test that only waits.
function(ib_lock_timed_tests regex)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t ${tests})
    if(t MATCHES "${regex}")
      set_tests_properties(${t} PROPERTIES RESOURCE_LOCK timed)
    endif()
  endforeach()
endfunction()
