/*
 * Shards: mapping files, and the table of formats (data/shard.h).
 */
#include "data/shard.h"

#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a file that is not a regular one is, for a refusal. */
static const char *file_kind(mode_t mode)
{
    return S_ISFIFO(mode)  ? "a FIFO (named pipe)"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISDIR(mode)  ? "a directory"
                            : "not a regular file";
}

/* Only regular files are shards: the type is checked before open (opening
 * a FIFO with no writer would block, a device's open may act), and open
 * is non-blocking in case the path changed in between, its type checked
 * again on the descriptor. */
adag_status_t adag__data_map(const char *path, adag_data_map_t *out)
{
    adag_status_t st = ADAG_OK;
    struct stat sb;
    out->base = NULL;
    out->len = 0;
    if (stat(path, &sb) != 0)
        return adag__error_errno(errno, "data shard %s: stat", path);
    if (!S_ISREG(sb.st_mode))
        return adag__error(ADAG_ERR_INVALID, "data shard %s is %s, not a regular file", path,
                          file_kind(sb.st_mode));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return adag__error_errno(errno, "data shard %s: open", path);
    if (fstat(fd, &sb) != 0) {
        st = adag__error_errno(errno, "data shard %s: stat", path);
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = adag__error(ADAG_ERR_INVALID, "data shard %s is %s, not a regular file", path,
                        file_kind(sb.st_mode));
        goto out;
    }
    if (sb.st_size == 0)
        goto out;
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        st = adag__error_errno(errno, "data shard %s: mmap of %lld bytes", path,
                              (long long)sb.st_size);
        goto out;
    }
    out->base = p;
    out->len = (size_t)sb.st_size;
out:
    close(fd);
    return st;
}

void adag__data_unmap(adag_data_map_t *m)
{
    if (m->base)
        munmap((void *)m->base, m->len);
    m->base = NULL;
    m->len = 0;
}

extern const adag_data_format_ops_t adag_data_records_ops, adag_data_npy_ops,
    adag_data_tokens_ops, adag_data_webdataset_ops, adag_data_files_ops;

const adag_data_format_ops_t *adag__data_format(adag_data_format_t f)
{
    static const adag_data_format_ops_t *const table[] = {
        &adag_data_records_ops,
        &adag_data_npy_ops,
        &adag_data_tokens_ops,
        &adag_data_webdataset_ops,
        &adag_data_files_ops,
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (table[i]->format == f)
            return table[i];
    return NULL;
}
