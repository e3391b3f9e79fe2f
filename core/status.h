/* SPDX-License-Identifier: Apache-2.0 */
/* Status codes shared by every part of infinity-bus.
 *
 * The enum and ib_status_str() are public (<infinity_bus/status.h>, installed
 * with the library); this header only gives the in-tree parts their usual
 * name for it. */
#ifndef IB_STATUS_H
#define IB_STATUS_H

#include <infinity_bus/status.h>

#endif
