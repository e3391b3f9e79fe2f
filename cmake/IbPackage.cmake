# SPDX-License-Identifier: Apache-2.0
# What a host needs around the programs (systemd unit, system user, example
# settings, documentation), and the Debian packages CPack builds from the
# install components.
#
# Installed by every install, for the configured prefix:
#   lib/systemd/system/ibus@.service            (component ibus)
#   <sysconfdir>/infinity-bus/ibus.env.example  (component ibus; /etc with prefix /usr)
#   share/doc/infinity-bus/{README.md,copyright} (component ibus)
#   share/doc/infinity-bus/docs/*.md             (component ibus)
#   share/doc/infinity-bus/examples/http/receiver.{py,js} (component ibus)
#   share/doc/libinfinity-bus0/copyright        (component library)
#   share/doc/libinfinity-bus-dev/copyright     (component library-dev)
# and with IB_SYSTEM_USER:
#   lib/sysusers.d/infinity-bus.conf            (component ibus)
#   share/man/man1/ibus.1 compressed to ibus.1.gz, as Debian wants it
#
# `cpack -G DEB` in a tree configured with -DCMAKE_INSTALL_PREFIX=/usr builds
# one package per group of components:
#   infinity-bus         ibus, plugins    the command, example plugins, unit, user
#   libinfinity-bus0     library          libinfinity-bus.so.0
#   libinfinity-bus-dev  library-dev,     headers, .so link, pkg-config and CMake
#                        plugin-dev       files of the library and the plugin ABI

# The source unit and settings are written for a hand install under
# /usr/local with a dynamic user (deploy/README.md), and deploy.systemd
# checks them as they are. A distribution install (prefix /usr) has a
# package manager to create a static user instead: its files stay the
# operator's across restarts and upgrades, and `runuser -u ibus` reaches
# them (ibus markers, sqlite3).
#
# GNUInstallDirs maps prefix /usr to /etc only in the FULL form; any other
# prefix keeps the relative one so `cmake --install --prefix` stays inside it.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_ib_system_user_default ON)
  set(IB_SYSCONFDIR ${CMAKE_INSTALL_FULL_SYSCONFDIR}/infinity-bus)
else()
  set(_ib_system_user_default OFF)
  set(IB_SYSCONFDIR ${CMAKE_INSTALL_SYSCONFDIR}/infinity-bus)
endif()
option(IB_SYSTEM_USER "Installed unit runs as the system user ibus (sysusers.d file installed)"
       ${_ib_system_user_default})
set(IB_PACKAGE_MAINTAINER "infinity-bus maintainers <maintainers@infinity-bus.invalid>"
    CACHE STRING "Maintainer field of the Debian packages")

set(IB_DOCDIR ${CMAKE_INSTALL_DATAROOTDIR}/doc/infinity-bus)
# systemd reads units from /usr/lib and /usr/local/lib alike, never from a
# multiarch directory.
set(IB_SYSTEMD_UNITDIR lib/systemd/system)

# ib_rewrite_file(<source> <output> <from> <to> [<from> <to>]...)
#   Copies <source> to <output> with each <from> replaced by its <to>. Each
#   <from> must occur in <source>: when an edit of the source drops one, the
#   configuration fails instead of installing a file that still points at
#   /usr/local. Reconfigures when <source> changes.
function(ib_rewrite_file src out)
  file(READ ${src} text)
  set(pairs ${ARGN})
  while(pairs)
    list(POP_FRONT pairs from to)
    string(FIND "${text}" "${from}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${src} has no '${from}' to rewrite for the install "
                          "(cmake/IbPackage.cmake)")
    endif()
    string(REPLACE "${from}" "${to}" text "${text}")
  endwhile()
  set(old "")
  if(EXISTS ${out})
    file(READ ${out} old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE ${out} "${text}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
endfunction()

set(_ib_deploy ${PROJECT_SOURCE_DIR}/deploy)
set(_ib_out ${PROJECT_BINARY_DIR}/deploy)
# The paths become a placeholder here, and the install puts in the prefix
# it installs to (cmake/IbInstallPrefix.cmake), which `cmake --install
# --prefix` may change after configuring.
set(_ib_prefix_mark "@IB_INSTALL_PREFIX@")
set(_ib_unit_edits
  "ExecStart=/usr/local/bin/ibus " "ExecStart=${_ib_prefix_mark}/${CMAKE_INSTALL_BINDIR}/ibus "
  "ExecStartPre=/usr/local/bin/ibus " "ExecStartPre=${_ib_prefix_mark}/${CMAKE_INSTALL_BINDIR}/ibus "
  "file:///usr/local/share/doc/infinity-bus/" "file://${_ib_prefix_mark}/${IB_DOCDIR}/")
if(IB_SYSTEM_USER)
  list(APPEND _ib_unit_edits "DynamicUser=yes" "DynamicUser=no")
endif()
ib_rewrite_file(${_ib_deploy}/systemd/ibus@.service ${_ib_out}/ibus@.service ${_ib_unit_edits})
ib_rewrite_file(${_ib_deploy}/systemd/ibus.env.example ${_ib_out}/ibus.env.example
  "IB_PLUGIN=/usr/local/lib/infinity-bus/plugins/"
  "IB_PLUGIN=${_ib_prefix_mark}/${CMAKE_INSTALL_LIBDIR}/infinity-bus/plugins/")

install(FILES ${_ib_out}/ibus@.service DESTINATION ${IB_SYSTEMD_UNITDIR} COMPONENT ibus)
install(FILES ${_ib_out}/ibus.env.example DESTINATION ${IB_SYSCONFDIR} COMPONENT ibus)
foreach(_ib_installed ${IB_SYSTEMD_UNITDIR}/ibus@.service ${IB_SYSCONFDIR}/ibus.env.example)
  install(CODE "set(IB_FILE \"${_ib_installed}\")
    set(IB_FROM \"${_ib_prefix_mark}\")
    set(IB_TO_REL \"\")
    set(IB_ROFF OFF)
    include(\"${PROJECT_SOURCE_DIR}/cmake/IbInstallPrefix.cmake\")" COMPONENT ibus)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${_ib_deploy}/debian/copyright
        DESTINATION ${IB_DOCDIR} COMPONENT ibus)
# The documentation, so the README's links work in the installed copy.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${IB_DOCDIR}/docs COMPONENT ibus
        FILES_MATCHING PATTERN "*.md")
# The http plugin's example receivers (docs/languages.md), beside the docs.
install(FILES ${PROJECT_SOURCE_DIR}/plugin/examples/http/receiver.py
              ${PROJECT_SOURCE_DIR}/plugin/examples/http/receiver.js
        DESTINATION ${IB_DOCDIR}/examples/http COMPONENT ibus)
install(FILES ${_ib_deploy}/debian/copyright
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/libinfinity-bus0 COMPONENT library)
install(FILES ${_ib_deploy}/debian/copyright
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/libinfinity-bus-dev COMPONENT library-dev)
if(IB_SYSTEM_USER)
  install(FILES ${_ib_deploy}/debian/infinity-bus.sysusers DESTINATION lib/sysusers.d
          RENAME infinity-bus.conf COMPONENT ibus)
  # Debian policy: manual pages are installed compressed, with gzip -9n (no
  # name or time stamp inside, so every build gives the same bytes). Runs
  # after plugin/cli installed ibus.1 (install rules run in the order given).
  install(CODE "set(_ib_mandir \"${CMAKE_INSTALL_MANDIR}\")" COMPONENT ibus)
  install(CODE [[
    set(_ib_man "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${_ib_mandir}/man1/ibus.1")
    if(EXISTS "${_ib_man}")
      execute_process(COMMAND gzip -9nf "${_ib_man}" COMMAND_ERROR_IS_FATAL ANY)
    endif()]] COMPONENT ibus)
endif()

# --- Debian packages (cpack -G DEB) ---------------------------------------
set(IB_DEB_VERSION ${PROJECT_VERSION}-1)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME infinity-bus)
set(CPACK_PACKAGE_VENDOR "the infinity-bus authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# CPack would put the project's description in front of every package's
# own; the first line of each CPACK_DEBIAN_<group>_DESCRIPTION is its summary.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
# /etc/infinity-bus lies outside the prefix: DESTDIR keeps it in the staging tree.
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_COMPONENTS_ALL ibus plugins library library-dev plugin-dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${IB_PACKAGE_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# ibus links libinfinity-bus.so.0 from the same build: dpkg-shlibdeps finds
# it there (and the exact dependency below names its package).
get_target_property(_ib_lib_dir infinity_bus BINARY_DIR)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${_ib_lib_dir})
# The library's own package tells dpkg-shlibdeps, for packages built
# against it later, which version provides its symbols.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

# ibus and the -dev files are built from the same tree as the library, and
# ibus calls its internals: any other version is not the one they expect.
set(_ib_lib_exact "libinfinity-bus0 (= ${IB_DEB_VERSION})")
set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME infinity-bus)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION net)
set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS ${_ib_lib_exact})
set(CPACK_DEBIAN_DAEMON_DESCRIPTION "idempotent consumer for NATS JetStream
ibus reads events from a JetStream stream, runs each one's handler plugins
at most once per consumer identity, and records what it handled in SQLite.
This package holds the ibus command, the example plugins, a sandboxed
systemd unit (ibus@.service) and the system user ibus it runs as.")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
    ${_ib_deploy}/debian/postinst ${_ib_deploy}/debian/prerm ${_ib_deploy}/debian/postrm)
# dpkg keeps an operator's edits of a conffile on upgrade and purges it with
# the package; only the /etc copy is one.
if(IS_ABSOLUTE "${IB_SYSCONFDIR}")
  file(WRITE ${_ib_out}/conffiles "${IB_SYSCONFDIR}/ibus.env.example\n")
  list(APPEND CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA ${_ib_out}/conffiles)
endif()

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libinfinity-bus0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "idempotent consumer for NATS JetStream (shared library)
libinfinity-bus runs a handler at most once per event id and consumer
identity, recording markers in SQLite or a JetStream key-value bucket.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libinfinity-bus-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ${_ib_lib_exact})
set(CPACK_DEBIAN_DEV_DESCRIPTION "idempotent consumer for NATS JetStream (development files)
Headers, pkg-config files (infinity-bus, infinity-bus-plugin) and CMake
packages (InfinityBus, InfinityBusPlugin) for programs that link
libinfinity-bus and for handler plugins built out of tree.")

# A package built for another prefix would put its files where the unit,
# the user's home and the plugin paths in the settings do not point; one
# without IB_SYSTEM_USER would create a user its unit does not run as.
set(CPACK_PROJECT_CONFIG_FILE ${_ib_out}/CPackProjectConfig.cmake)
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr" AND IB_SYSTEM_USER)
  file(WRITE ${CPACK_PROJECT_CONFIG_FILE} "# this tree may be packaged\n")
else()
  file(WRITE ${CPACK_PROJECT_CONFIG_FILE}
       "if(CPACK_GENERATOR STREQUAL \"DEB\")\n"
       "  message(FATAL_ERROR \"the Debian packages need a tree configured with \"\n"
       "    \"-DCMAKE_INSTALL_PREFIX=/usr and IB_SYSTEM_USER on (this one: \"\n"
       "    \"${CMAKE_INSTALL_PREFIX}, IB_SYSTEM_USER ${IB_SYSTEM_USER})\")\n"
       "endif()\n")
endif()

include(CPack)

cpack_add_component_group(daemon)
cpack_add_component_group(runtime)
cpack_add_component_group(dev)
cpack_add_component(ibus GROUP daemon)
cpack_add_component(plugins GROUP daemon)
cpack_add_component(library GROUP runtime)
cpack_add_component(library-dev GROUP dev)
cpack_add_component(plugin-dev GROUP dev)
