/* The fuzz targets' invariant check: a failed one aborts, naming the
 * target, file, line and condition, so libFuzzer keeps the input. */
#ifndef ADAG_FUZZ_CHECK_H
#define ADAG_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(target, cond)                                                        \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s: %s:%d: check failed: %s\n", target, __FILE__, __LINE__, \
                    #cond);                                                             \
            abort();                                                                    \
        }                                                                               \
    } while (0)

#endif
