#include "common/fd.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int adag__fd_above_stdio(int fd)
{
    if (fd < 0 || fd > 2)
        return fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int err = errno;
    close(fd);
    errno = err;
    return moved;
}
