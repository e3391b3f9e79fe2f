/* SPDX-License-Identifier: Apache-2.0 */
/* <infinity_bus/idempotency.h> compiles alone (C11, -pedantic-errors). */
#include <infinity_bus/idempotency.h>

size_t ib_test_header_idempotency(void);
size_t ib_test_header_idempotency(void)
{
    return sizeof(ib_idempotent_options) + IB_EVENT_ID_SIZE;
}
