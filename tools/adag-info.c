/* adag-info: what this build of adag knows. `adag-info -c` lists the
 * ADAG_* settings with the values a runtime created here would have (the
 * environment's) and their defaults; `adag-info
 * topo` the machine's topology and the placements actors get on it;
 * `adag-info attach` a running driver's live view. */
#include "gpu/comm.h"
#include "gpu/device.h"
#include "tools/info_attach.h"
#include "tools/info_topo.h"

#include <adag.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -c: through the public configuration API, as a client would. */
static int print_settings(void)
{
    adag_config_h config = NULL;
    char *text = NULL;
    size_t need = 0;
    int rc = 1;
    if (adag_config_read(&config) != ADAG_OK ||
        adag_config_print(config, NULL, 0, &need) != ADAG_ERR_TOO_LARGE ||
        (text = malloc(need)) == NULL || adag_config_print(config, text, need, NULL) != ADAG_OK) {
        fprintf(stderr, "adag-info -c: %s\n",
                need && !text ? "out of memory" : adag_last_error());
        goto out;
    }
    fputs(text, stdout);
    rc = 0;
out:
    free(text);
    if (config)
        adag_config_release(config);
    return rc;
}

/* "devices: cuda: 0 (no driver (...))": each backend, how many devices it
 * has here and why (not). */
static void print_devices(void)
{
    printf("devices:");
    const char *sep = " ";
    for (uint32_t kind = 0; kind < ADAG_DEVICE_KIND_COUNT; kind++) {
        const adag_device_ops_t *ops = adag__device_backend(kind);
        if (!ops)
            continue;
        char why[512] = "";
        unsigned n = ops->probe(why, sizeof(why));
        printf("%s%s: %u%s%s%s", sep, ops->name, n, why[0] ? " (" : "", why, why[0] ? ")" : "");
        sep = ", ";
    }
    printf("\n");
}

/* "communicators: host: usable (...), nccl: not usable: no CUDA device
 * (...)": each communicator backend, the devices its ranks are on, and
 * whether it can run here and why (not). */
static void print_comms(void)
{
    printf("communicators:");
    const char *sep = " ";
    for (uint32_t kind = 0; kind < ADAG_COMM_KIND_COUNT; kind++) {
        const adag_comm_ops_t *ops = adag__comm_backend(kind);
        if (!ops)
            continue;
        char why[512] = "";
        int usable = ops->probe(why, sizeof(why));
        printf("%s%s (ranks on %s devices): %s", sep, ops->name,
               adag_device_kind_name(ops->device_kind), usable ? "usable" : "not usable");
        if (why[0])
            printf(usable ? " (%s)" : ": %s", why);
        sep = ", ";
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "-c") == 0)
        return print_settings();
    if (argc >= 2 && strcmp(argv[1], "topo") == 0)
        return adag__info_topo(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "attach") == 0)
        return adag__info_attach(argc - 2, argv + 2);
    if (argc == 1) {
        printf("adag %d.%d\n", ADAG_VERSION_MAJOR, ADAG_VERSION_MINOR);
        printf("transports: shm (memfd rings), self (same actor), device (device memory over IPC, async copies)\n");
        print_devices();
        print_comms();
        printf("run `adag-info -c` for the settings, `adag-info topo` for the topology\n");
        return 0;
    }
    fprintf(stderr, "usage: adag-info [-c | topo [FILE.xml] [--xml OUT.xml] |\n"
                    "                  attach [PID | SOCKET-PATH] [--interval S] [--count N]]\n");
    return 2;
}
