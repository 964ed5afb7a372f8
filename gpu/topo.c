/*
 * The topology map from hwloc (see gpu/topo.h). hwloc gives the tree:
 * packages, NUMA nodes, cores, and the PCI devices with the OS devices
 * under them (cudaN, mlx5_N, eth0); libibverbs (gpu/topo_verbs.c) gives the
 * live state of RDMA ports, which an XML file carries as hwloc's
 * "Port<N>State" infos.
 */
#include "gpu/topo.h"

#include "common/error.h"
#include "common/settings.h"

#include <errno.h>
#include <hwloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PCI_CLASS_VGA 0x0300
#define PCI_CLASS_3D 0x0302
#define PCI_CLASS_ACCEL 0x1200
#define PCI_VENDOR_NVIDIA 0x10de
#define PCI_VENDOR_AMD 0x1002

const char *adag__topo_dist_name(adag_topo_dist_t d)
{
    switch (d) {
    case ADAG_TOPO_SAME_SWITCH: return "same PCI switch";
    case ADAG_TOPO_SAME_ROOT: return "same PCI root";
    case ADAG_TOPO_SAME_NUMA: return "same NUMA node";
    case ADAG_TOPO_SAME_SOCKET: return "same socket";
    case ADAG_TOPO_ACROSS_SOCKETS: return "across sockets";
    }
    return "?";
}

static void to_cpuset(hwloc_const_bitmap_t b, cpu_set_t *out)
{
    CPU_ZERO(out);
    if (!b)
        return;
    int i;
    hwloc_bitmap_foreach_begin(i, b)
    {
        if (i < CPU_SETSIZE)
            CPU_SET(i, out);
    }
    hwloc_bitmap_foreach_end();
}

static int package_of(hwloc_topology_t h, hwloc_obj_t o)
{
    hwloc_obj_t p = hwloc_get_ancestor_obj_by_type(h, HWLOC_OBJ_PACKAGE, o);
    if (p)
        return (int)p->logical_index;
    if (o->type == HWLOC_OBJ_PACKAGE)
        return (int)o->logical_index;
    /* hung off the machine: one package is still unambiguous */
    return hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PACKAGE) == 1 ? 0 : -1;
}

/* A device's NUMA node, package and CPUs: those of its non-I/O ancestor. */
static void locate(adag_topo_t *t, hwloc_obj_t pci, adag_topo_dev_t *d)
{
    hwloc_topology_t h = t->hwloc;
    hwloc_obj_t up = hwloc_get_non_io_ancestor_obj(h, pci);
    d->numa = -1;
    d->package = -1;
    CPU_ZERO(&d->cpus);
    if (!up)
        return;
    if (up->nodeset && hwloc_bitmap_weight(up->nodeset) == 1)
        d->numa = hwloc_bitmap_first(up->nodeset);
    d->package = package_of(h, up);
    cpu_set_t all;
    to_cpuset(up->cpuset, &all);
    CPU_AND(&d->cpus, &all, &t->allowed);
    if (CPU_COUNT(&d->cpus) == 0)
        d->cpus = all;
}

static void bus_id(hwloc_obj_t pci, char *buf, size_t len)
{
    snprintf(buf, len, "%04x:%02x:%02x.%x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
             pci->attr->pcidev.dev, pci->attr->pcidev.func);
}

static int is_gpu(hwloc_obj_t pci, const char **name)
{
    const char *coproc = NULL, *gpu = NULL;
    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE)
            continue;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC && !coproc)
            coproc = c->name;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU && !gpu)
            gpu = c->name;
    }
    unsigned cls = pci->attr->pcidev.class_id, vendor = pci->attr->pcidev.vendor_id;
    int compute_vendor = vendor == PCI_VENDOR_NVIDIA || vendor == PCI_VENDOR_AMD;
    int by_class = compute_vendor && (cls == PCI_CLASS_3D || cls == PCI_CLASS_ACCEL ||
                                      (cls == PCI_CLASS_VGA && vendor == PCI_VENDOR_NVIDIA));
    *name = coproc ? coproc : gpu ? gpu : "";
    /* a GPU osdev alone (a DRM card of a display adapter) is not enough */
    return by_class || coproc != NULL;
}

/* The first active port among hwloc's "Port<N>State" infos (4 = ACTIVE). */
static int info_active_port(hwloc_obj_t osdev)
{
    for (unsigned i = 0; i < osdev->infos_count; i++) {
        unsigned port;
        char rest[8];
        if (sscanf(osdev->infos[i].name, "Port%uState%7s", &port, rest) == 1 &&
            strcmp(osdev->infos[i].value, "4") == 0 && port > 0)
            return (int)port;
    }
    return 0;
}

static int nic_of(hwloc_obj_t pci, adag_topo_dev_t *d)
{
    hwloc_obj_t rdma = NULL, net = NULL;
    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE)
            continue;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && !rdma)
            rdma = c;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && !net)
            net = c;
    }
    if (!rdma && !net)
        return 0;
    if (net)
        snprintf(d->netdev, sizeof(d->netdev), "%s", net->name);
    if (rdma) {
        d->rdma = 1;
        snprintf(d->name, sizeof(d->name), "%s", rdma->name);
        d->port = info_active_port(rdma);
    } else {
        snprintf(d->name, sizeof(d->name), "%s", net->name);
    }
    return 1;
}

static int cmp_bus(const void *a, const void *b)
{
    const adag_topo_dev_t *x = a, *y = b;
    if (x->rdma != y->rdma)
        return y->rdma - x->rdma; /* RDMA NICs first */
    if (!x->bus_id[0] != !y->bus_id[0])
        return x->bus_id[0] ? -1 : 1;
    int c = strcmp(x->bus_id, y->bus_id);
    return c ? c : strcmp(x->name, y->name);
}

static adag_status_t push_dev(adag_topo_dev_t **arr, unsigned *n, const adag_topo_dev_t *d)
{
    adag_topo_dev_t *grown = realloc(*arr, (*n + 1) * sizeof(**arr));
    if (!grown)
        return adag__error(ADAG_ERR_NO_MEMORY, "topology: out of memory");
    grown[(*n)++] = *d;
    *arr = grown;
    return ADAG_OK;
}

static adag_status_t scan_numa(adag_topo_t *t)
{
    hwloc_topology_t h = t->hwloc;
    int n = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
    t->numa = calloc(n > 0 ? (size_t)n : 1, sizeof(*t->numa));
    if (!t->numa)
        return adag__error(ADAG_ERR_NO_MEMORY, "topology: out of memory");
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, (unsigned)i);
        adag_topo_numa_t *m = &t->numa[t->nnuma++];
        cpu_set_t all;
        m->os_index = (int)o->os_index;
        m->package = package_of(h, o);
        to_cpuset(o->cpuset, &all);
        CPU_AND(&m->cpus, &all, &t->allowed);
        m->ncores = (unsigned)hwloc_get_nbobjs_inside_cpuset_by_type(h, o->cpuset,
                                                                     HWLOC_OBJ_CORE);
        m->bytes = (unsigned long long)o->attr->numanode.local_memory;
    }
    return ADAG_OK;
}

static adag_status_t scan_pci(adag_topo_t *t)
{
    hwloc_topology_t h = t->hwloc;
    adag_status_t st = ADAG_OK;
    for (hwloc_obj_t o = hwloc_get_next_pcidev(h, NULL); o && st == ADAG_OK;
         o = hwloc_get_next_pcidev(h, o)) {
        adag_topo_dev_t d;
        const char *name;
        memset(&d, 0, sizeof(d));
        d.obj = o;
        bus_id(o, d.bus_id, sizeof(d.bus_id));
        locate(t, o, &d);
        if (is_gpu(o, &name)) {
            snprintf(d.name, sizeof(d.name), "%s", name);
            st = push_dev(&t->gpus, &t->ngpus, &d);
        } else if (nic_of(o, &d)) {
            st = push_dev(&t->nics, &t->nnics, &d);
        }
    }
    return st;
}

/* The live RDMA ports replace what hwloc read; devices hwloc did not place
 * are added with unknown locality. */
static adag_status_t merge_verbs(adag_topo_t *t, char *note, size_t note_len)
{
    adag_rdma_dev_t devs[ADAG_TOPO_MAX_RDMA];
    unsigned n = 0;
    adag__rdma_scan(devs, &n, note, note_len);
    for (unsigned i = 0; i < n; i++) {
        int port = 0;
        for (unsigned p = 0; p < devs[i].nports && !port; p++)
            if (devs[i].active[p])
                port = (int)p + 1;
        int k = adag__topo_nic_by_name(t, devs[i].name);
        if (k >= 0 && t->nics[k].rdma) {
            t->nics[k].port = port;
            continue;
        }
        adag_topo_dev_t d;
        memset(&d, 0, sizeof(d));
        snprintf(d.name, sizeof(d.name), "%s", devs[i].name);
        d.rdma = 1;
        d.port = port;
        d.numa = d.package = -1;
        adag_status_t st = push_dev(&t->nics, &t->nnics, &d);
        if (st != ADAG_OK)
            return st;
    }
    return ADAG_OK;
}

/* verbs_note: what the live scan said (NULL for an XML file) */
static void count_rdma_note(adag_topo_t *t, const char *verbs_note)
{
    unsigned rdma = 0, active = 0;
    for (unsigned i = 0; i < t->nnics; i++) {
        rdma += t->nics[i].rdma != 0;
        active += t->nics[i].rdma && t->nics[i].port;
    }
    if (rdma == 0)
        snprintf(t->rdma_note, sizeof(t->rdma_note), "no RDMA devices (%s)",
                 verbs_note ? verbs_note : "none in the XML file");
    else
        snprintf(t->rdma_note, sizeof(t->rdma_note), "%u RDMA device%s, %u with an active port "
                 "(in %s)", rdma, rdma == 1 ? "" : "s", active, t->source);
}

adag_status_t adag__topo_load(const char *xml, int this_system, adag_topo_t **out)
{
    adag_status_t st = ADAG_OK;
    hwloc_topology_t h = NULL;
    char verbs_note[96] = "";
    adag_topo_t *t = calloc(1, sizeof(*t));
    *out = NULL;
    if (!t)
        return adag__error(ADAG_ERR_NO_MEMORY, "topology: out of memory");
    if (hwloc_topology_init(&h) != 0) {
        st = adag__error_errno(errno, "topology: hwloc_topology_init");
        goto fail;
    }
    t->hwloc = h;
    snprintf(t->source, sizeof(t->source), "%s", xml ? xml : "this machine");
    if (xml && hwloc_topology_set_xml(h, xml) != 0) {
        st = adag__error_errno(errno, "topology: cannot use hwloc XML file %s", xml);
        goto fail;
    }
    if (xml && this_system)
        hwloc_topology_set_flags(h, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM);
    hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(h) != 0) {
        st = xml ? adag__error_errno(errno, "topology: hwloc cannot load %s (not an hwloc XML "
                                           "topology?)", xml)
                 : adag__error_errno(errno, "topology: hwloc cannot read this machine");
        goto fail;
    }
    t->this_system = hwloc_topology_is_thissystem(h);
    to_cpuset(hwloc_topology_get_allowed_cpuset(h), &t->allowed);
    if (t->this_system) {
        cpu_set_t mine, both;
        adag__cpus_allowed(&mine);
        CPU_AND(&both, &t->allowed, &mine);
        if (CPU_COUNT(&both))
            t->allowed = both;
    }
    t->npackages = (unsigned)hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PACKAGE);
    t->ncores = (unsigned)hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_CORE);
    t->npus = (unsigned)hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PU);
    if ((st = scan_numa(t)) != ADAG_OK || (st = scan_pci(t)) != ADAG_OK)
        goto fail;
    if (!xml && (st = merge_verbs(t, verbs_note, sizeof(verbs_note))) != ADAG_OK)
        goto fail;
    count_rdma_note(t, xml ? NULL : verbs_note);
    if (t->ngpus)
        qsort(t->gpus, t->ngpus, sizeof(*t->gpus), cmp_bus);
    if (t->nnics)
        qsort(t->nics, t->nnics, sizeof(*t->nics), cmp_bus);
    *out = t;
    return ADAG_OK;
fail:
    adag__topo_free(t);
    return st;
}

void adag__topo_free(adag_topo_t *t)
{
    if (!t)
        return;
    if (t->hwloc)
        hwloc_topology_destroy(t->hwloc);
    free(t->numa);
    free(t->gpus);
    free(t->nics);
    free(t);
}

static pthread_once_t topo_once = PTHREAD_ONCE_INIT;
static adag_topo_t *topo_process;
static adag_status_t topo_status;
static char topo_error[ADAG_ERROR_MAX];

static void topo_load_once(void)
{
    const adag_process_settings_t *s = adag__process_settings();
    topo_status = adag__topo_load(s->topo_xml, s->topo_xml && s->topo_xml_this_system,
                                 &topo_process);
    if (topo_status != ADAG_OK)
        snprintf(topo_error, sizeof(topo_error), "%s", adag_last_error());
}

adag_status_t adag__topo_get(const adag_topo_t **out)
{
    pthread_once(&topo_once, topo_load_once);
    *out = topo_process;
    if (topo_status != ADAG_OK)
        return adag__error(topo_status, "%s", topo_error);
    return ADAG_OK;
}

const adag_topo_numa_t *adag__topo_numa(const adag_topo_t *t, int os_index)
{
    for (unsigned i = 0; i < t->nnuma; i++)
        if (t->numa[i].os_index == os_index)
            return &t->numa[i];
    return NULL;
}

int adag__topo_gpu_by_bus(const adag_topo_t *t, const char *id)
{
    char full[32];
    /* "07:00.0" means domain 0 */
    snprintf(full, sizeof(full), "%s%s", strlen(id) <= 7 ? "0000:" : "", id);
    for (unsigned i = 0; i < t->ngpus; i++)
        if (strcasecmp(t->gpus[i].bus_id, full) == 0)
            return (int)i;
    /* CUDA writes an 8-digit domain ("00000000:07:00.0") */
    size_t n = strlen(full);
    for (unsigned i = 0; i < t->ngpus; i++) {
        size_t m = strlen(t->gpus[i].bus_id);
        if (n > m && strcasecmp(full + n - m, t->gpus[i].bus_id) == 0 &&
            strspn(full, "0") >= n - m)
            return (int)i;
    }
    return -1;
}

int adag__topo_nic_by_name(const adag_topo_t *t, const char *name)
{
    for (unsigned i = 0; i < t->nnics; i++)
        if (strcmp(t->nics[i].name, name) == 0 ||
            (t->nics[i].netdev[0] && strcmp(t->nics[i].netdev, name) == 0))
            return (int)i;
    return -1;
}

static adag_topo_dist_t by_numa(int numa_a, int pkg_a, int numa_b, int pkg_b)
{
    if (numa_a >= 0 && numa_a == numa_b)
        return ADAG_TOPO_SAME_NUMA;
    if (pkg_a >= 0 && pkg_a == pkg_b)
        return ADAG_TOPO_SAME_SOCKET;
    return ADAG_TOPO_ACROSS_SOCKETS;
}

/* The nearest object above both (hwloc's own helper compares depths,
 * which I/O objects do not have). */
static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
    for (hwloc_obj_t x = a->parent; x; x = x->parent)
        for (hwloc_obj_t y = b->parent; y; y = y->parent)
            if (x == y)
                return x;
    return NULL;
}

adag_topo_dist_t adag__topo_dist(const adag_topo_t *t, const adag_topo_dev_t *a,
                                const adag_topo_dev_t *b)
{
    (void)t;
    if (a->obj && b->obj) {
        hwloc_obj_t c = common_ancestor(a->obj, b->obj);
        if (c && c->type == HWLOC_OBJ_BRIDGE)
            return c->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST ? ADAG_TOPO_SAME_ROOT
                                                                         : ADAG_TOPO_SAME_SWITCH;
    }
    return by_numa(a->numa, a->package, b->numa, b->package);
}

adag_topo_dist_t adag__topo_dist_numa(const adag_topo_t *t, const adag_topo_dev_t *d, int numa)
{
    const adag_topo_numa_t *m = adag__topo_numa(t, numa);
    return by_numa(d->numa, d->package, numa, m ? m->package : -1);
}

adag_status_t adag__topo_export_xml(const adag_topo_t *t, const char *path)
{
    if (hwloc_topology_export_xml(t->hwloc, path, 0) != 0)
        return adag__error_errno(errno, "topology: cannot write hwloc XML to %s", path);
    return ADAG_OK;
}
