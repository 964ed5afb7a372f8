/* File-descriptor hygiene shared by every layer; common/fd.c also holds
 * adag_write_fd, the public writer to an fd (include/adag.h). */
#ifndef ADAG_COMMON_FD_H
#define ADAG_COMMON_FD_H

/* A program started with its standard descriptors closed hands out 0, 1 or
 * 2 for the next fd it opens; a printf would then write into the runtime's
 * memfd, eventfd or socket. Every fd the runtime keeps goes through this:
 * an fd at 0-2 is moved to 3 or above (close-on-exec) and the original is
 * closed. Returns the fd to use, or -1 with errno set (the fd is closed). */
int adag__fd_above_stdio(int fd);

#endif
