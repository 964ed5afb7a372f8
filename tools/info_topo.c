/* adag-info topo: the topology map (gpu/topo.h) and the placement each
 * actor would get on it (gpu/place.h). */
#include "tools/info_topo.h"

#include "common/error.h"
#include "common/settings.h"
#include "gpu/place.h"

#include <stdio.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: adag-info topo [FILE.xml] [--xml OUT.xml]\n"
                    "  FILE.xml      show an hwloc XML topology instead of this machine's\n"
                    "  --xml OUT.xml write the topology shown as hwloc XML\n");
    return 2;
}

static void print_place(const adag_topo_t *t, const char *label, int gpu)
{
    adag_place_request_t req = {.gpu = gpu, .numa = -1, .automatic = 1};
    adag_place_t p;
    char text[ADAG_CPULIST_MAX + 128];
    if (adag__place(t, &req, label, &p) != ADAG_OK) {
        printf("  %-30s %s\n", label, adag_last_error());
        return;
    }
    adag__place_format(&p, text, sizeof(text));
    printf("  %-30s %s\n", label, text);
}

/* The map shown, kept until the process ends: freeing it unloads hwloc's
 * PCI plugin, whose libpciaccess keeps its device table for the process's
 * life (a leak report that could no longer name it). */
static adag_topo_t *shown;

int adag__info_topo(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--xml") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (argv[i][0] != '-' && !in)
            in = argv[i];
        else
            return usage();
    }
    /* a file given here is shown as another machine's unless
     * ADAG_TOPO_XML_THIS_SYSTEM says it is this one */
    if (adag__topo_load(in ? in : adag__process_settings()->topo_xml,
                       adag__process_settings()->topo_xml_this_system != 0, &shown) != ADAG_OK) {
        fprintf(stderr, "adag-info topo: %s\n", adag_last_error());
        return 1;
    }
    const adag_topo_t *t = shown;
    if (out) {
        adag_status_t st = adag__topo_export_xml(t, out);
        if (st != ADAG_OK) {
            fprintf(stderr, "adag-info topo: %s\n", adag_last_error());
            return 1;
        }
        fprintf(stderr, "adag-info topo: wrote %s\n", out);
    }
    adag__topo_print(t, stdout);
    printf("placements (ADAG_PLACEMENT=1; an actor's cpus/numa/nic params override each part):\n");
    for (unsigned i = 0; i < t->ngpus; i++) {
        char label[48];
        snprintf(label, sizeof(label), "actor on GPU %u (%s)", i, t->gpus[i].bus_id);
        print_place(t, label, (int)i);
    }
    print_place(t, "actor without a GPU", -1);
    printf("  %-30s those of the actor that reads the DAG's input\n", "loader threads");
    return 0;
}
