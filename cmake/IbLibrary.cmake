# SPDX-License-Identifier: Apache-2.0
# ib_library_objects(<object library>)
#   Marks an OBJECT library as a piece of libinfinity-bus. The project builds
#   with hidden visibility, so that plugins and executables export nothing by
#   accident; the library's pieces are built with default visibility instead,
#   and the linker version script (idempotency/infinity-bus.map) is the one
#   list of what the library exports: public headers then need no export
#   macro, and the internals the rest of ibus calls stay reachable without
#   tagging each declaration. -fno-semantic-interposition lets the compiler
#   call and inline the library's own functions directly, as it did when
#   they were static archives: nobody may interpose them.
function(ib_library_objects target)
  set_target_properties(${target} PROPERTIES C_VISIBILITY_PRESET default)
  target_compile_options(${target} PRIVATE -fno-semantic-interposition)
endfunction()

# pkg-config files find the prefix from their own place (${pcfiledir}), so
# `cmake --install --prefix` elsewhere, or a moved prefix, still gives
# correct paths. IB_PC_PREFIX and IB_PC_INCLUDEDIR are for the .pc.in files
# of every package installed (library and plugin ABI).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(IB_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(IB_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
  set(IB_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
else()
  file(RELATIVE_PATH _ib_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" _ib_up "${_ib_up}")
  set(IB_PC_PREFIX "\${pcfiledir}/${_ib_up}")
  set(IB_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
  set(IB_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()

# ib_install_package(NAME <package> EXPORT <export set> VERSION <version>
#                    COMPONENT <component> PC <pc file stem> [ARCH_INDEPENDENT])
#   Installs what find_package(<package>) and pkg-config need, the same way
#   for every package this project ships: <stem>.pc configured from
#   <stem>.pc.in beside the caller, and in ${libdir}/cmake/<package>/ the
#   export set (namespace InfinityBus::), <package>Config.cmake from
#   <package>Config.cmake.in, and a SameMajorVersion version file.
include(CMakePackageConfigHelpers)
function(ib_install_package)
  cmake_parse_arguments(P "ARCH_INDEPENDENT" "NAME;EXPORT;VERSION;COMPONENT;PC" "" ${ARGN})
  set(dir ${CMAKE_INSTALL_LIBDIR}/cmake/${P_NAME})
  set(src ${CMAKE_CURRENT_SOURCE_DIR})
  set(bin ${CMAKE_CURRENT_BINARY_DIR})
  configure_file(${src}/${P_PC}.pc.in ${bin}/${P_PC}.pc @ONLY)
  install(FILES ${bin}/${P_PC}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
          COMPONENT ${P_COMPONENT})
  install(EXPORT ${P_EXPORT} NAMESPACE InfinityBus:: DESTINATION ${dir} COMPONENT ${P_COMPONENT})
  configure_package_config_file(${src}/${P_NAME}Config.cmake.in ${bin}/${P_NAME}Config.cmake
                                INSTALL_DESTINATION ${dir})
  set(arch)
  if(P_ARCH_INDEPENDENT)
    set(arch ARCH_INDEPENDENT)
  endif()
  write_basic_package_version_file(${bin}/${P_NAME}ConfigVersion.cmake VERSION ${P_VERSION}
                                   COMPATIBILITY SameMajorVersion ${arch})
  install(FILES ${bin}/${P_NAME}Config.cmake ${bin}/${P_NAME}ConfigVersion.cmake
          DESTINATION ${dir} COMPONENT ${P_COMPONENT})
endfunction()
