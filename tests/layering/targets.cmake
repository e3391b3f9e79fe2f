# SPDX-License-Identifier: Apache-2.0
# Writes the link edges between this project's targets, one
# "target dependency" pair per line, for the target_cycles test. It runs
# deferred to the end of the top-level directory, so it sees every target,
# including the ones added after tests/ (bench/). CMake accepts circular
# links between static libraries, so a circle would otherwise go unnoticed.
function(ib_layering_write_target_edges)
  set(dirs ${PROJECT_SOURCE_DIR})
  set(targets)
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(here DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    get_property(below DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    list(APPEND targets ${here})
    list(APPEND dirs ${below})
  endwhile()
  set(edges)
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    set(deps)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(deps ${t} LINK_LIBRARIES)
    endif()
    get_target_property(iface ${t} INTERFACE_LINK_LIBRARIES)
    foreach(d IN LISTS deps iface)
      # a static library's PRIVATE links reach its users as $<LINK_ONLY:x>
      string(REGEX REPLACE "^\\$<LINK_ONLY:([^>]*)>$" "\\1" d "${d}")
      if(d IN_LIST targets)
        list(APPEND edges "${t} ${d}")
      endif()
    endforeach()
  endforeach()
  # a PUBLIC link shows in both properties
  list(REMOVE_DUPLICATES edges)
  list(JOIN edges "\n" text)
  file(WRITE ${PROJECT_BINARY_DIR}/tests/layering/target_edges.txt "${text}\n")
endfunction()

cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL ib_layering_write_target_edges)
