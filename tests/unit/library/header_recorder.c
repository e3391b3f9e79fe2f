/* SPDX-License-Identifier: Apache-2.0 */
/* <infinity_bus/recorder.h> compiles alone (C11, -pedantic-errors). */
#include <infinity_bus/recorder.h>

const char *ib_test_header_recorder(const ib_recorder *r);
const char *ib_test_header_recorder(const ib_recorder *r)
{
    return ib_recorder_kind(r);
}
