/* Memfds named by bytes (gpu/memfd_handle.h). */
#include "gpu/memfd_handle.h"

#include "common/error.h"
#include "common/fd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

adag_status_t adag__memfd_ref_make(int fd, uint64_t size, const char *who, const char *what,
                                  adag_memfd_ref_t *ref)
{
    struct stat sb;
    memset(ref, 0, sizeof(*ref));
    if (fstat(fd, &sb) != 0)
        return adag__error_errno(errno, "%s: exporting %s", who, what);
    *ref = (adag_memfd_ref_t){.magic = ADAG_MEMFD_REF_MAGIC,
                              .pid = (int32_t)getpid(),
                              .fd = fd,
                              .dev = (uint64_t)sb.st_dev,
                              .ino = (uint64_t)sb.st_ino,
                              .size = size};
    return ADAG_OK;
}

int adag__memfd_ref_open(const adag_memfd_ref_t *ref, uint64_t min, const char *who,
                        const char *what, adag_status_t *st)
{
    struct stat sb;
    char path[64];
    if (ref->magic != ADAG_MEMFD_REF_MAGIC || ref->pid <= 0 || ref->fd < 0) {
        *st = adag__error(ADAG_ERR_PROTOCOL, "%s: malformed %s (magic 0x%x, pid %d, fd %d)", who,
                         what, ref->magic, ref->pid, ref->fd);
        return -1;
    }
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", ref->pid, ref->fd);
    int fd = adag__fd_above_stdio(open(path, O_RDWR | O_CLOEXEC));
    if (fd < 0) {
        *st = adag__error_errno(errno, "%s: opening the memfd of the %s of process %d (%s)", who,
                               what, ref->pid, path);
        return -1;
    }
    uint64_t need = ref->size > min ? ref->size : min;
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_dev != ref->dev || (uint64_t)sb.st_ino != ref->ino ||
        (uint64_t)sb.st_size < need || ref->size > SIZE_MAX / 2) {
        *st = adag__error(ADAG_ERR_PROTOCOL,
                         "%s: the %s of process %d names fd %d, which is not that memfd any more "
                         "(or is smaller than %llu bytes)",
                         who, what, ref->pid, ref->fd, (unsigned long long)need);
        close(fd);
        return -1;
    }
    return fd;
}
