/* adag-info: what this build of adag knows. `adag-info -c` lists the
 * ADAG_* settings with their values in force and defaults. */
#include "common/settings.h"

#include <adag.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "-c") == 0) {
        adag_settings_print(stdout);
        return 0;
    }
    if (argc == 1) {
        printf("adag %d.%d\n", ADAG_VERSION_MAJOR, ADAG_VERSION_MINOR);
        printf("transports: shm (memfd rings), local (same actor)\n");
        printf("run `adag-info -c` for the settings\n");
        return 0;
    }
    fprintf(stderr, "usage: adag-info [-c]\n");
    return 2;
}
