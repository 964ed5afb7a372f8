/*
 * The data suites' scratch directory (tests/data_rig.h).
 */
#include "data_rig.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char data_dir[64];

void data_dir_make(void)
{
    snprintf(data_dir, sizeof(data_dir), "/tmp/adag-data-XXXXXX");
    cr_assert_not_null(mkdtemp(data_dir));
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void data_dir_remove(void)
{
    if (data_dir[0])
        nftw(data_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *data_path(const char *name)
{
    static char paths[8][512];
    static unsigned next;
    char *p = paths[next++ % 8];
    snprintf(p, 512, "%s/%s", data_dir, name);
    return p;
}
