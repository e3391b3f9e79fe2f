# SPDX-License-Identifier: Apache-2.0
# ib_add_plugin_module(<target> OUTPUT_NAME <name> SOURCES ... [DEFINES ...])
#   Builds a handler plugin the way a third party would: a MODULE library
#   (dlopen only, never linked against) named <name>.so, compiled against
#   the public ABI header alone, with hidden visibility so ib_plugin_entry is
#   its only exported symbol, and linked with -z defs (outside sanitizer
#   builds) so a plugin that leans on a host symbol fails to link instead of
#   failing to load.
function(ib_add_plugin_module target)
  cmake_parse_arguments(M "" "OUTPUT_NAME" "SOURCES;DEFINES" ${ARGN})
  add_library(${target} MODULE ${M_SOURCES})
  target_link_libraries(${target} PRIVATE InfinityBus::plugin)
  target_compile_definitions(${target} PRIVATE ${M_DEFINES})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME ${M_OUTPUT_NAME}
    C_VISIBILITY_PRESET hidden)
  if(NOT IB_SANITIZE)
    target_link_options(${target} PRIVATE -Wl,-z,defs)
  endif()
endfunction()
