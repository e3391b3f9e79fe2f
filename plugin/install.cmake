# SPDX-License-Identifier: Apache-2.0
# Installation of the plugin ABI, so plugins build out of tree from the
# installed header alone:
#   ${CMAKE_INSTALL_INCLUDEDIR}/infinity_bus/plugin.h
#   ${CMAKE_INSTALL_LIBDIR}/pkgconfig/infinity-bus-plugin.pc     (Cflags only)
#   ${CMAKE_INSTALL_LIBDIR}/cmake/InfinityBusPlugin/             (InfinityBus::plugin)
#   ${CMAKE_INSTALL_LIBDIR}/infinity-bus/plugins/{audit,flaky,relay,ledger,http}.so
# Both package files carry the ABI version (IB_ABI_MAJOR.IB_ABI_MINOR), not
# the product's: that is what a plugin depends on, so
# find_package(InfinityBusPlugin 1.0) accepts any 1.x host header.

# The package's target name works in-tree too, so the examples are built
# exactly as a third party builds a plugin.
add_library(InfinityBus::plugin ALIAS ib_plugin_abi)
set_target_properties(ib_plugin_abi PROPERTIES EXPORT_NAME plugin)

file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/include/infinity_bus/plugin.h _ib_abi_lines
     REGEX "^#define IB_ABI_(MAJOR|MINOR) [0-9]+")
string(REGEX REPLACE ".*IB_ABI_MAJOR ([0-9]+).*" "\\1" _ib_abi_major "${_ib_abi_lines}")
string(REGEX REPLACE ".*IB_ABI_MINOR ([0-9]+).*" "\\1" _ib_abi_minor "${_ib_abi_lines}")
set(IB_ABI_VERSION "${_ib_abi_major}.${_ib_abi_minor}")

install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/include/infinity_bus/plugin.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/infinity_bus COMPONENT plugin-dev)

# An INTERFACE target carrying the include directory; the .pc is
# relocatable (IB_PC_PREFIX, IB_PC_INCLUDEDIR: cmake/IbLibrary.cmake).
install(TARGETS ib_plugin_abi EXPORT InfinityBusPluginTargets COMPONENT plugin-dev)
ib_install_package(NAME InfinityBusPlugin EXPORT InfinityBusPluginTargets
                   VERSION ${IB_ABI_VERSION} COMPONENT plugin-dev PC infinity-bus-plugin
                   ARCH_INDEPENDENT)

install(TARGETS ib_plugin_audit ib_plugin_flaky ib_plugin_relay ib_plugin_ledger ib_plugin_http
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/infinity-bus/plugins COMPONENT plugins)
