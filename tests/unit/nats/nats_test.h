/* SPDX-License-Identifier: Apache-2.0 */
/* The main of a nats part test whose cases build messages: nats.c's
 * messages need the library open, as a connection would have it, so the
 * group opens it first and closes it last. Runs the test named by argv[1]
 * (as ctest registers them) or all. */
#ifndef IB_NATS_TEST_H
#define IB_NATS_TEST_H

#include <nats/nats.h>

#include "ib_test.h"

static inline int ib_nats_test_open(void **state)
{
    (void)state;
    return nats_Open(-1) == NATS_OK ? 0 : -1;
}

static inline int ib_nats_test_close(void **state)
{
    (void)state;
    nats_Close();
    return 0;
}

#define IB_NATS_TEST_MAIN(tests)                                                                   \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        if (argc > 1)                                                                              \
            cmocka_set_test_filter(argv[1]);                                                       \
        return cmocka_run_group_tests(tests, ib_nats_test_open, ib_nats_test_close);               \
    }

#endif
