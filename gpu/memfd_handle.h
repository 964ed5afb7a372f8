/*
 * A memfd named by bytes only, so the name travels in any message (the
 * emulated device's memory and event handles, the host communicator's ids):
 * the owner's pid and the number of the memfd it keeps open, plus the
 * memfd's identity (device and inode) and the size it holds. Another
 * process of the same user opens /proc/<pid>/fd/<fd> (the kernel allows it
 * to a process that may read the owner's state, the check `ps` needs) and
 * the identity is checked, so a reused fd number or a dead owner is
 * refused rather than mapped.
 */
#ifndef ADAG_GPU_MEMFD_HANDLE_H
#define ADAG_GPU_MEMFD_HANDLE_H

#include <adag.h>
#include <stdint.h>

#define ADAG_MEMFD_REF_MAGIC 0x61646768u /* "adgh" */

typedef struct {
    uint32_t magic; /* ADAG_MEMFD_REF_MAGIC */
    int32_t pid;    /* the owner */
    int32_t fd;     /* its memfd, open in the owner */
    uint32_t pad;
    uint64_t dev, ino; /* the memfd's identity */
    uint64_t size;     /* bytes the memfd holds (at least) */
} adag_memfd_ref_t;

/* Names memfd `fd` of this process, holding `size` bytes. `who` and `what`
 * go into messages: "<who>: exporting <what>" ("emulated device 0", "memory
 * handle"). */
adag_status_t adag__memfd_ref_make(int fd, uint64_t size, const char *who, const char *what,
                                  adag_memfd_ref_t *ref);

/* Opens (O_RDWR, close-on-exec) the memfd ref names, checked to be that
 * memfd and to hold at least max(ref->size, min) bytes. Returns the fd, or
 * -1 with the error recorded in *st: ADAG_ERR_PROTOCOL for a malformed or
 * stale ref, ADAG_ERR_IO (errno's) when /proc/<pid>/fd/<fd> cannot be
 * opened (a dead owner). */
int adag__memfd_ref_open(const adag_memfd_ref_t *ref, uint64_t min, const char *who,
                        const char *what, adag_status_t *st);

#endif
