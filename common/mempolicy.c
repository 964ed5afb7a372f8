#include "common/mempolicy.h"

#include <errno.h>
#include <linux/mempolicy.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MASK_BITS (8 * sizeof(unsigned long))

static int node_mask(int node, unsigned long *mask)
{
    if (node < 0 || node > ADAG_MEMPOLICY_MAX_NODE || node >= (int)MASK_BITS) {
        errno = EINVAL;
        return -1;
    }
    *mask = 1ul << node;
    return 0;
}

int adag__mempolicy_thread(int node)
{
    unsigned long mask;
    if (node_mask(node, &mask))
        return -1;
    return syscall(SYS_set_mempolicy, MPOL_PREFERRED, &mask, MASK_BITS + 1) == 0 ? 0 : -1;
}

int adag__mempolicy_range(void *addr, size_t len, int node)
{
    unsigned long mask;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)addr & ~(page - 1);
    uintptr_t hi = ((uintptr_t)addr + len + page - 1) & ~(page - 1);
    if (node_mask(node, &mask))
        return -1;
    if (len == 0)
        return 0;
    return syscall(SYS_mbind, (void *)lo, hi - lo, MPOL_PREFERRED, &mask, MASK_BITS + 1, 0) == 0
               ? 0
               : -1;
}

int adag__mempolicy_of(void *addr, int *mode, int *node)
{
    unsigned long mask[ADAG_MEMPOLICY_MAX_NODE / MASK_BITS + 1] = {0};
    int m = 0;
    if (syscall(SYS_get_mempolicy, &m, mask, (unsigned long)(sizeof(mask) * 8 + 1), addr,
                MPOL_F_ADDR) != 0)
        return -1;
    *mode = m;
    *node = -1;
    for (int i = 0; i <= ADAG_MEMPOLICY_MAX_NODE; i++)
        if (mask[i / MASK_BITS] & (1ul << (i % MASK_BITS))) {
            *node = i;
            break;
        }
    return 0;
}
