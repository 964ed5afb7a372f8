#include "common/hist.h"

uint64_t adag__hist_copy(const adag_hist_t *h, uint64_t *n)
{
    uint64_t total = 0;
    for (unsigned b = 0; b < ADAG_HIST_BUCKETS; b++)
        total += n[b] = atomic_load_explicit(&h->n[b], memory_order_relaxed);
    return total;
}

uint64_t adag__hist_quantile(const uint64_t *n, double q, uint64_t max)
{
    uint64_t total = 0;
    for (unsigned b = 0; b < ADAG_HIST_BUCKETS; b++)
        total += n[b];
    if (total == 0)
        return 0;
    /* the rank of the quantile, 1-based: the smallest value with at least
     * q of the values at or below it */
    double want = q * (double)total;
    uint64_t rank = (uint64_t)want, seen = 0;
    if ((double)rank < want || rank == 0)
        rank++;
    for (unsigned b = 0; b < ADAG_HIST_BUCKETS; b++) {
        seen += n[b];
        if (seen >= rank) {
            uint64_t width, v = adag__hist_floor(b, &width);
            v += width / 2;
            return v < max ? v : max;
        }
    }
    return max;
}
