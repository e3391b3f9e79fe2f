/* SPDX-License-Identifier: Apache-2.0 */
/* <infinity_bus/status.h> compiles alone (C11, -pedantic-errors). */
#include <infinity_bus/status.h>

const char *ib_test_header_status(void);
const char *ib_test_header_status(void)
{
    return ib_status_str(IB_OK);
}
