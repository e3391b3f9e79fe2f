/* SPDX-License-Identifier: Apache-2.0 */
/* Shared cmocka glue: every test executable ends with IB_TEST_MAIN(tests),
 * which runs the test named by argv[1] (as ctest registers them) or all. */
#ifndef IB_TEST_H
#define IB_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#define IB_TEST_MAIN(tests)                                                                        \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        if (argc > 1)                                                                              \
            cmocka_set_test_filter(argv[1]);                                                       \
        return cmocka_run_group_tests(tests, NULL, NULL);                                          \
    }

#endif
