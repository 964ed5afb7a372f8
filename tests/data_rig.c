/*
 * The data suites' scratch directory (tests/data_rig.h).
 */
#include "data_rig.h"

#include <criterion/criterion.h>
#include <dirent.h>
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

void data_dir_remove(void)
{
    DIR *d = opendir(data_dir);
    if (!d)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof(path), "%s/%s", data_dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(data_dir);
}

const char *data_path(const char *name)
{
    static char paths[8][512];
    static unsigned next;
    char *p = paths[next++ % 8];
    snprintf(p, 512, "%s/%s", data_dir, name);
    return p;
}
