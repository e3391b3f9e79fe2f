# Installation of libinfinity-bus, so programs build against it out of tree:
#   ${CMAKE_INSTALL_LIBDIR}/libinfinity-bus.so.0 (+ .so.X.Y.Z; .so for -dev)
#   ${CMAKE_INSTALL_INCLUDEDIR}/infinity_bus/{idempotency,recorder,status,version}.h
#   ${CMAKE_INSTALL_LIBDIR}/pkgconfig/infinity-bus.pc
#   ${CMAKE_INSTALL_LIBDIR}/cmake/InfinityBus/               (InfinityBus::idempotency)
# Components: "library" is what a running program needs (the .so.0, also
# for ibus), "library-dev" what building against it needs. Both package
# files carry the product version.
include(CMakePackageConfigHelpers)

set(_ib_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/InfinityBus)

install(TARGETS infinity_bus EXPORT InfinityBusTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library
                NAMELINK_COMPONENT library-dev)
install(FILES ${PROJECT_SOURCE_DIR}/include/infinity_bus/idempotency.h
              ${PROJECT_SOURCE_DIR}/include/infinity_bus/recorder.h
              ${PROJECT_SOURCE_DIR}/include/infinity_bus/status.h
              ${PROJECT_BINARY_DIR}/generated/infinity_bus/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/infinity_bus COMPONENT library-dev)

configure_file(${CMAKE_CURRENT_SOURCE_DIR}/infinity-bus.pc.in
               ${CMAKE_CURRENT_BINARY_DIR}/infinity-bus.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/infinity-bus.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT library-dev)

install(EXPORT InfinityBusTargets NAMESPACE InfinityBus::
        DESTINATION ${_ib_cmake_dir} COMPONENT library-dev)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/InfinityBusConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/InfinityBusConfig.cmake
                              INSTALL_DESTINATION ${_ib_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/InfinityBusConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/InfinityBusConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/InfinityBusConfigVersion.cmake
        DESTINATION ${_ib_cmake_dir} COMPONENT library-dev)
