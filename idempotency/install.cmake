# SPDX-License-Identifier: Apache-2.0
# Installation of libinfinity-bus, so programs build against it out of tree:
#   ${CMAKE_INSTALL_LIBDIR}/libinfinity-bus.so.0 (+ .so.X.Y.Z; .so for -dev)
#   ${CMAKE_INSTALL_INCLUDEDIR}/infinity_bus/{idempotency,recorder,status,version}.h
#   ${CMAKE_INSTALL_LIBDIR}/pkgconfig/infinity-bus.pc
#   ${CMAKE_INSTALL_LIBDIR}/cmake/InfinityBus/               (InfinityBus::idempotency)
# Components: "library" is what a running program needs (the .so.0, also
# for ibus), "library-dev" what building against it needs. Both package
# files carry the product version.
install(TARGETS infinity_bus EXPORT InfinityBusTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library
                NAMELINK_COMPONENT library-dev)
install(FILES ${PROJECT_SOURCE_DIR}/include/infinity_bus/idempotency.h
              ${PROJECT_SOURCE_DIR}/include/infinity_bus/recorder.h
              ${PROJECT_SOURCE_DIR}/include/infinity_bus/status.h
              ${PROJECT_BINARY_DIR}/generated/infinity_bus/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/infinity_bus COMPONENT library-dev)

ib_install_package(NAME InfinityBus EXPORT InfinityBusTargets VERSION ${PROJECT_VERSION}
                   COMPONENT library-dev PC infinity-bus)
