/* SPDX-License-Identifier: Apache-2.0 */
/* Invariant checks for fuzz targets: unlike assert(), never compiled out
 * (release builds define NDEBUG), and they abort so both libFuzzer and the
 * replay driver report the input. */
#ifndef IB_FUZZ_CHECK_H
#define IB_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);     \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
