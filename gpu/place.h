/*
 * Placement: where an actor's threads, memory and network traffic go,
 * decided from the topology map (gpu/topo.h). A pure function of the map
 * and the request (adag__place), and the calls that apply a placement to
 * the calling thread (adag__place_apply); the NIC it chose is for the
 * transport to apply (adag__place_nic).
 */
#ifndef ADAG_GPU_PLACE_H
#define ADAG_GPU_PLACE_H

#include "gpu/topo.h"

#define ADAG_NIC_NAME_MAX 40

/* What an actor asks for. Every part is optional. */
typedef struct {
    int gpu;          /* index into the map's GPUs; -1: none */
    const char *cpus; /* CPU list ("0-7,16"); NULL: chosen */
    int numa;         /* NUMA node (os index); -1: chosen, or none with numa_given */
    int numa_given;   /* numa is the user's (-1: memory bound to no node) */
    const char *nic;  /* "mlx5_0" or "mlx5_0:1"; "" for none; NULL: chosen */
    int automatic;    /* choose what the request leaves open (ADAG_PLACEMENT) */
} adag_place_request_t;

/* which parts the user gave (adag_place_t.given) */
enum { ADAG_PLACE_GIVEN_CPUS = 1, ADAG_PLACE_GIVEN_NUMA = 2, ADAG_PLACE_GIVEN_NIC = 4 };

typedef struct {
    int gpu;                    /* index into the map's GPUs, -1 */
    char gpu_bus_id[16];        /* its bus id, "" */
    int numa;                   /* the NUMA node its memory prefers, -1: none chosen */
    cpu_set_t cpus;             /* the CPUs it runs on */
    int bound;                  /* cpus narrower than what the process may use */
    char nic[ADAG_NIC_NAME_MAX]; /* "mlx5_0:1" (a UCX device name), "" none */
    adag_topo_dist_t nic_dist;  /* from its GPU (or NUMA node) to the NIC */
    unsigned given;             /* ADAG_PLACE_GIVEN_* */
    int this_system;            /* the map is this machine: binding applies */
} adag_place_t;

/* Decides a placement. A request that cannot be met (CPUs outside those
 * allowed, an unknown NUMA node, GPU or NIC) is ADAG_ERR_INVALID naming
 * what and what exists. `who` names the actor in messages. */
adag_status_t adag__place(const adag_topo_t *t, const adag_place_request_t *req, const char *who,
                         adag_place_t *out);

/* A placement that binds nothing: every allowed CPU, no node, no NIC. */
void adag__place_none(adag_place_t *out);

/* Binds the calling thread (threads it creates later inherit): its CPUs
 * and, with a NUMA node, memory preferring that node (set_mempolicy
 * MPOL_PREFERRED). Nothing when the placement binds nothing or the map is
 * another machine's. */
adag_status_t adag__place_apply(const adag_place_t *p, const char *who);

/* The NIC this machine's UCX should use for the placement ("mlx5_0:1"),
 * or NULL: none chosen, or the map is another machine's (UCX chooses).
 * The transport applies it (adag__ucx_use_net_device). */
const char *adag__place_nic(const adag_place_t *p);

/* Writes "CPUs 0-15, NUMA 0, GPU 0000:07:00.0, NIC mlx5_0:1 (same PCI switch)". */
void adag__place_format(const adag_place_t *p, char *buf, size_t len);

#endif
