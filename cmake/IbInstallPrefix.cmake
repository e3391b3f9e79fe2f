# SPDX-License-Identifier: Apache-2.0
# Run by `cmake --install` (install(SCRIPT)): makes an installed file name
# the prefix it was installed to. A configure-time prefix is not enough:
# `cmake --install build --prefix P` picks another one afterwards, and the
# unit, the example settings and the manual page must then point into P.
#
# Set before including:
#   IB_FILE    the file as installed, relative to the prefix (or absolute)
#   IB_FROM    the text to replace (unescaped, also for roff)
#   IB_TO_REL  what replaces it, relative to the install-time prefix
#   IB_ROFF    ON when the file is roff, whose '-' is written '\-'
if(IS_ABSOLUTE "${IB_FILE}")
  set(_ib_path "$ENV{DESTDIR}${IB_FILE}")
else()
  set(_ib_path "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${IB_FILE}")
endif()
set(_ib_to "${CMAKE_INSTALL_PREFIX}/${IB_TO_REL}")
string(REGEX REPLACE "/+$" "" _ib_to "${_ib_to}")
string(REGEX REPLACE "/+" "/" _ib_to "${_ib_to}")
set(_ib_from "${IB_FROM}")
if(IB_ROFF)
  string(REPLACE "-" "\\-" _ib_to "${_ib_to}")
  string(REPLACE "-" "\\-" _ib_from "${_ib_from}")
endif()
if(EXISTS "${_ib_path}")
  file(READ "${_ib_path}" _ib_text)
  string(REPLACE "${_ib_from}" "${_ib_to}" _ib_text "${_ib_text}")
  file(WRITE "${_ib_path}" "${_ib_text}")
endif()
