/*
 * The machine's topology: NUMA nodes and their CPUs, GPUs (by PCI bus id)
 * and NICs, and how far apart any two of them are. Built from hwloc (with
 * its I/O devices) and libibverbs (RDMA devices, their ports and states).
 * It describes the live machine, or another one from an hwloc XML file
 * (ADAG_TOPO_XML), so tests can describe machines that are not here.
 *
 * A loaded map is read-only: threads may share it. adag__topo_get() gives
 * the process's map (loaded once, on first use).
 */
#ifndef ADAG_GPU_TOPO_H
#define ADAG_GPU_TOPO_H

#include "common/cpuset.h"

#include <adag.h>
#include <stdio.h>

/* How close two things are, nearest first. */
typedef enum {
    ADAG_TOPO_SAME_SWITCH = 1, /* behind one PCI switch */
    ADAG_TOPO_SAME_ROOT,       /* under one PCI host bridge */
    ADAG_TOPO_SAME_NUMA,       /* on one NUMA node */
    ADAG_TOPO_SAME_SOCKET,     /* in one package, on different NUMA nodes */
    ADAG_TOPO_ACROSS_SOCKETS,  /* in different packages (or unknown) */
} adag_topo_dist_t;

/* "same PCI switch", "same PCI root", ... */
const char *adag__topo_dist_name(adag_topo_dist_t d);

typedef struct {
    int os_index;     /* the kernel's node number */
    int package;      /* logical index of its package, -1 if unknown */
    cpu_set_t cpus;   /* its CPUs (allowed ones) */
    unsigned ncores;  /* its cores */
    unsigned long long bytes;
} adag_topo_numa_t;

/* A GPU or a NIC: a PCI device (or an RDMA device hwloc did not place). */
typedef struct {
    char bus_id[16];  /* "0000:07:00.0"; "" if not on PCI (or unknown) */
    char name[32];    /* GPU: its OS device ("cuda0", "nvml0", "card0") or "";
                       * NIC: its RDMA device ("mlx5_0"), else its interface */
    char netdev[32];  /* NIC: its network interface ("ib0", "eth0"), or "" */
    int rdma;         /* NIC: an RDMA (verbs / OpenFabrics) device */
    int port;         /* NIC with rdma: its first ACTIVE port (1-based); 0: none */
    int numa;         /* os index of the NUMA node it hangs off, -1 if unknown */
    int package;      /* logical index of its package, -1 if unknown */
    cpu_set_t cpus;   /* the CPUs closest to it (empty if unknown) */
    void *obj;        /* its hwloc PCI object; NULL if none */
} adag_topo_dev_t;

typedef struct adag_topo {
    void *hwloc;              /* hwloc_topology_t */
    int this_system;          /* describes the machine this runs on: binding applies */
    char source[256];         /* "this machine" or the XML file */
    cpu_set_t allowed;        /* CPUs this process may use */
    unsigned npackages, ncores, npus;
    unsigned nnuma;
    adag_topo_numa_t *numa;
    unsigned ngpus;           /* in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID) */
    adag_topo_dev_t *gpus;
    unsigned nnics;           /* RDMA NICs first (bus order), then the others */
    adag_topo_dev_t *nics;
    char rdma_note[128];      /* the verbs scan: "2 RDMA devices", "no RDMA devices", ... */
} adag_topo_t;

/* Loads the live machine (xml NULL) or an hwloc XML file. this_system:
 * the XML describes the machine this runs on (its CPUs may be bound). */
adag_status_t adag__topo_load(const char *xml, int this_system, adag_topo_t **out);
void adag__topo_free(adag_topo_t *t);

/* The process's map, loaded once from ADAG_TOPO_XML (and
 * ADAG_TOPO_XML_THIS_SYSTEM) or the live machine; a failure to load is
 * reported to every caller. Never freed. */
adag_status_t adag__topo_get(const adag_topo_t **out);

/* The NUMA node with that os index, NULL if there is none. */
const adag_topo_numa_t *adag__topo_numa(const adag_topo_t *t, int os_index);
/* A GPU by bus id (case-insensitive, "0000:" domain optional); -1 if none. */
int adag__topo_gpu_by_bus(const adag_topo_t *t, const char *bus_id);
/* A NIC by its RDMA device or interface name; -1 if none. */
int adag__topo_nic_by_name(const adag_topo_t *t, const char *name);

/* How close two devices are (PCI ancestry, then NUMA node and package). */
adag_topo_dist_t adag__topo_dist(const adag_topo_t *t, const adag_topo_dev_t *a,
                                const adag_topo_dev_t *b);
/* How close a device is to a NUMA node. */
adag_topo_dist_t adag__topo_dist_numa(const adag_topo_t *t, const adag_topo_dev_t *d, int numa);

/* Writes the map as hwloc XML (the file adag__topo_load reads back). */
adag_status_t adag__topo_export_xml(const adag_topo_t *t, const char *path);

/* Prints the map: packages, NUMA nodes, GPUs, NICs and the distance
 * table between GPUs and NICs. */
void adag__topo_print(const adag_topo_t *t, FILE *out);

/* ---- libibverbs (gpu/topo_verbs.c) ---- */

#define ADAG_TOPO_MAX_RDMA 64
#define ADAG_TOPO_MAX_PORTS 8

typedef struct {
    char name[32];
    unsigned nports;
    int active[ADAG_TOPO_MAX_PORTS]; /* port i+1 is IBV_PORT_ACTIVE */
} adag_rdma_dev_t;

/* Lists the RDMA devices (at most ADAG_TOPO_MAX_RDMA) and their port
 * states; *n 0 and a note ("no RDMA devices") when there are none. Never
 * fails: a device that cannot be opened is listed with no active port. */
void adag__rdma_scan(adag_rdma_dev_t *devs, unsigned *n, char *note, size_t note_len);

#endif
