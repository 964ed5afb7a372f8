/* adag-info: what this build of adag knows. `adag-info -c` lists the
 * ADAG_* settings with their values in force and defaults. */
#include "common/settings.h"
#include "gpu/device.h"

#include <adag.h>
#include <stdio.h>
#include <string.h>

/* "devices: cuda: 0 (no driver (...))": each backend, how many devices it
 * has here and why (not). */
static void print_devices(void)
{
    printf("devices:");
    const char *sep = " ";
    for (uint32_t kind = 0; kind < ADAG_DEVICE_KIND_COUNT; kind++) {
        const adag_device_ops_t *ops = adag_device_backend(kind);
        if (!ops)
            continue;
        char why[512] = "";
        unsigned n = ops->probe(why, sizeof(why));
        printf("%s%s: %u%s%s%s", sep, ops->name, n, why[0] ? " (" : "", why, why[0] ? ")" : "");
        sep = ", ";
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "-c") == 0) {
        adag_settings_print(stdout);
        return 0;
    }
    if (argc == 1) {
        printf("adag %d.%d\n", ADAG_VERSION_MAJOR, ADAG_VERSION_MINOR);
        printf("transports: shm (memfd rings), self (same actor)\n");
        print_devices();
        printf("run `adag-info -c` for the settings\n");
        return 0;
    }
    fprintf(stderr, "usage: adag-info [-c]\n");
    return 2;
}
