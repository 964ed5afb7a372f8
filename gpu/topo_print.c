/* adag-info topo: the topology map as text. */
#include "gpu/topo.h"

#include <hwloc.h>
#include <string.h>

static const char *short_dist(adag_topo_dist_t d)
{
    switch (d) {
    case ADAG_TOPO_SAME_SWITCH: return "switch";
    case ADAG_TOPO_SAME_ROOT: return "root";
    case ADAG_TOPO_SAME_NUMA: return "numa";
    case ADAG_TOPO_SAME_SOCKET: return "socket";
    case ADAG_TOPO_ACROSS_SOCKETS: return "system";
    }
    return "?";
}

static void print_dev(FILE *out, const char *label, const adag_topo_dev_t *d)
{
    char cpus[ADAG_CPULIST_MAX];
    adag__cpulist_format(&d->cpus, cpus, sizeof(cpus));
    fprintf(out, "  %-8s %-13s", label, d->bus_id[0] ? d->bus_id : "(no PCI)");
    if (d->numa >= 0)
        fprintf(out, " NUMA %d", d->numa);
    else
        fprintf(out, " NUMA ?");
    if (d->package >= 0)
        fprintf(out, "  socket %d", d->package);
    fprintf(out, "  CPUs %s", cpus[0] ? cpus : "?");
}

void adag__topo_print(const adag_topo_t *t, FILE *out)
{
    char cpus[ADAG_CPULIST_MAX];
    adag__cpulist_format(&t->allowed, cpus, sizeof(cpus));
    fprintf(out, "topology of %s (hwloc %s)%s\n", t->source, HWLOC_VERSION,
            t->this_system ? "" : ": another machine, placements are shown, nothing is bound");
    fprintf(out, "  %u package%s, %u NUMA node%s, %u cores, %u CPUs; this process may use "
            "CPUs %s\n", t->npackages, t->npackages == 1 ? "" : "s", t->nnuma,
            t->nnuma == 1 ? "" : "s", t->ncores, t->npus, cpus);
    for (unsigned i = 0; i < t->nnuma; i++) {
        const adag_topo_numa_t *m = &t->numa[i];
        adag__cpulist_format(&m->cpus, cpus, sizeof(cpus));
        fprintf(out, "  NUMA node %d: socket %d, %u core%s, CPUs %s, %.1f GiB\n", m->os_index,
                m->package, m->ncores, m->ncores == 1 ? "" : "s", cpus, (double)m->bytes / (1 << 30));
    }
    fprintf(out, "GPUs: %u\n", t->ngpus);
    for (unsigned i = 0; i < t->ngpus; i++) {
        char label[16];
        snprintf(label, sizeof(label), "gpu%u", i);
        print_dev(out, label, &t->gpus[i]);
        fprintf(out, "  %s\n", t->gpus[i].name);
    }
    fprintf(out, "NICs: %u; RDMA: %s\n", t->nnics, t->rdma_note);
    for (unsigned i = 0; i < t->nnics; i++) {
        const adag_topo_dev_t *n = &t->nics[i];
        print_dev(out, n->name, n);
        if (n->rdma && n->port)
            fprintf(out, "  RDMA, port %d active", n->port);
        else if (n->rdma)
            fprintf(out, "  RDMA, no active port");
        if (n->netdev[0] && strcmp(n->netdev, n->name) != 0)
            fprintf(out, "  interface %s", n->netdev);
        fputc('\n', out);
    }
    if (t->ngpus == 0 || t->nnics == 0)
        return;
    fprintf(out, "distance GPU -> NIC (switch < root < numa < socket < system):\n  %-8s", "");
    for (unsigned j = 0; j < t->nnics; j++)
        fprintf(out, " %-8.8s", t->nics[j].name);
    fputc('\n', out);
    for (unsigned i = 0; i < t->ngpus; i++) {
        fprintf(out, "  gpu%-5u", i);
        for (unsigned j = 0; j < t->nnics; j++)
            fprintf(out, " %-8s", short_dist(adag__topo_dist(t, &t->gpus[i], &t->nics[j])));
        fputc('\n', out);
    }
}
