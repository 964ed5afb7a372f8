/* Unit tests (suites "topo", "place"): the topology map (gpu/topo.c) and
 * the placement decisions (gpu/place.c) on hwloc XML topologies of
 * machines that are not here (tests/topo/README.md describes them), and
 * the live map of this machine. */
#include "gpu/place.h"
#include "gpu/topo.h"
#include "transport/chan_ucx_query.h"
#include "transport/ucx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOPO_FILE(f) ADAG_TEST_SRC_DIR "/tests/topo/" f

static adag_topo_t *load(const char *file)
{
    adag_topo_t *t = NULL;
    cr_assert_eq(adag__topo_load(file, 0, &t), ADAG_OK, "%s: %s", file, adag_last_error());
    return t;
}

static const char *cpus_of(const cpu_set_t *set)
{
    static char buf[4][ADAG_CPULIST_MAX];
    static int k;
    char *b = buf[k++ % 4];
    adag__cpulist_format(set, b, ADAG_CPULIST_MAX);
    return b;
}

/* the server: socket s holds NUMA node s, GPUs 4s..4s+3 and NICs
 * mlx5_2s, mlx5_2s+1; GPUs 2j, 2j+1 sit behind mlx5_j's switch */
static const char *socket_cpus[2] = {"0-15,32-47", "16-31,48-63"};

Test(topo, server_map)
{
    adag_topo_t *t = load(TOPO_FILE("server-2s8g4n.xml"));
    cr_assert_eq(t->this_system, 0);
    cr_assert_eq(t->npackages, 2);
    cr_assert_eq(t->nnuma, 2);
    cr_assert_eq(t->npus, 64);
    cr_assert_str_eq(cpus_of(&t->allowed), "0-63");
    for (int s = 0; s < 2; s++) {
        cr_assert_eq(t->numa[s].os_index, s);
        cr_assert_eq(t->numa[s].package, s);
        cr_assert_str_eq(cpus_of(&t->numa[s].cpus), socket_cpus[s]);
    }
    cr_assert_eq(t->ngpus, 8);
    for (unsigned k = 0; k < 8; k++) {
        const adag_topo_dev_t *g = &t->gpus[k];
        cr_assert_eq(g->numa, (int)k / 4, "gpu %u on node %d", k, g->numa);
        cr_assert_eq(g->package, (int)k / 4);
        cr_assert_str_eq(cpus_of(&g->cpus), socket_cpus[k / 4]);
        if (k)
            cr_assert_lt(strcmp(t->gpus[k - 1].bus_id, g->bus_id), 0, "GPUs in bus order");
        char name[16];
        snprintf(name, sizeof(name), "cuda%u", k);
        cr_assert_str_eq(g->name, name);
        cr_assert_eq(adag__topo_gpu_by_bus(t, g->bus_id), (int)k);
    }
    /* four RDMA NICs first, then the plain Ethernet one */
    cr_assert_eq(t->nnics, 5);
    for (unsigned j = 0; j < 4; j++) {
        char name[16];
        snprintf(name, sizeof(name), "mlx5_%u", j);
        cr_assert_str_eq(t->nics[j].name, name);
        cr_assert(t->nics[j].rdma && t->nics[j].port == 1, "%s port %d", name, t->nics[j].port);
        cr_assert_eq(t->nics[j].numa, (int)j / 2);
        cr_assert_eq(adag__topo_nic_by_name(t, name), (int)j);
    }
    /* as CUDA writes bus ids (8-digit domain, capitals) and short forms */
    cr_assert_eq(adag__topo_gpu_by_bus(t, "00000000:0B:00.0"), 2);
    cr_assert_eq(adag__topo_gpu_by_bus(t, "0000:0b:00.0"), 2);
    cr_assert_eq(adag__topo_gpu_by_bus(t, "0b:00.0"), 2);
    cr_assert_eq(adag__topo_gpu_by_bus(t, "0000:0b:00.1"), -1);
    cr_assert_eq(adag__topo_gpu_by_bus(t, "00010000:0b:00.0"), -1);
    cr_assert_str_eq(t->nics[4].name, "eno1");
    cr_assert(!t->nics[4].rdma);
    cr_assert(strstr(t->rdma_note, "4 RDMA devices, 4 with an active port"), "%s", t->rdma_note);
    adag__topo_free(t);
}

Test(topo, distances)
{
    adag_topo_t *t = load(TOPO_FILE("server-2s8g4n.xml"));
    for (unsigned k = 0; k < 8; k++)
        for (unsigned j = 0; j < 4; j++) {
            adag_topo_dist_t want = j == k / 2             ? ADAG_TOPO_SAME_SWITCH
                                    : j / 2 == k / 4       ? ADAG_TOPO_SAME_NUMA
                                                           : ADAG_TOPO_ACROSS_SOCKETS;
            adag_topo_dist_t d = adag__topo_dist(t, &t->gpus[k], &t->nics[j]);
            cr_assert_eq(d, want, "gpu%u - mlx5_%u: %s, want %s", k, j, adag__topo_dist_name(d),
                         adag__topo_dist_name(want));
            cr_assert_eq(adag__topo_dist(t, &t->nics[j], &t->gpus[k]), d, "symmetric");
        }
    /* eno1 hangs off socket 0's first host bridge, above the switch of GPUs 0-1 */
    cr_assert_eq(adag__topo_dist(t, &t->gpus[0], &t->nics[4]), ADAG_TOPO_SAME_ROOT);
    cr_assert_eq(adag__topo_dist(t, &t->gpus[2], &t->nics[4]), ADAG_TOPO_SAME_NUMA);
    cr_assert_eq(adag__topo_dist(t, &t->gpus[0], &t->gpus[1]), ADAG_TOPO_SAME_SWITCH);
    cr_assert_eq(adag__topo_dist_numa(t, &t->gpus[5], 1), ADAG_TOPO_SAME_NUMA);
    cr_assert_eq(adag__topo_dist_numa(t, &t->gpus[5], 0), ADAG_TOPO_ACROSS_SOCKETS);
    adag__topo_free(t);
}

static adag_place_t place_ok(const adag_topo_t *t, adag_place_request_t r)
{
    adag_place_t p;
    cr_assert_eq(adag__place(t, &r, "actor x", &p), ADAG_OK, "%s", adag_last_error());
    return p;
}

static void place_fails(const adag_topo_t *t, adag_place_request_t r, const char *says)
{
    adag_place_t p;
    cr_assert_eq(adag__place(t, &r, "actor x", &p), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), says), "\"%s\" lacks \"%s\"", adag_last_error(), says);
    cr_assert(strstr(adag_last_error(), "actor x"), "%s", adag_last_error());
}

/* A request: the defaults (no GPU, no node, automatic), then the fields
 * given, which override them (hence the warning off) */
#pragma GCC diagnostic ignored "-Woverride-init"
#define REQ(...) ((adag_place_request_t){.gpu = -1, .numa = -1, .automatic = 1, __VA_ARGS__})

/* Every GPU actor gets its socket's CPUs and node and the NIC behind its
 * own switch. */
Test(place, gpu_actors_get_their_socket_and_switch)
{
    adag_topo_t *t = load(TOPO_FILE("server-2s8g4n.xml"));
    for (int k = 0; k < 8; k++) {
        adag_place_t p = place_ok(t, REQ(.gpu = k));
        char nic[16];
        snprintf(nic, sizeof(nic), "mlx5_%d:1", k / 2);
        cr_assert_str_eq(cpus_of(&p.cpus), socket_cpus[k / 4], "gpu %d", k);
        cr_assert_eq(p.numa, k / 4);
        cr_assert_str_eq(p.nic, nic, "gpu %d", k);
        cr_assert_eq(p.nic_dist, ADAG_TOPO_SAME_SWITCH);
        cr_assert_str_eq(p.gpu_bus_id, t->gpus[k].bus_id);
        cr_assert(p.bound && !p.this_system && p.given == 0);
    }
    /* no GPU, nothing asked: not bound, UCX chooses */
    adag_place_t p = place_ok(t, REQ());
    cr_assert(!p.bound && p.numa == -1 && !p.nic[0]);
    cr_assert_str_eq(cpus_of(&p.cpus), "0-63");
    /* a NUMA node only: its CPUs, and a NIC on it */
    p = place_ok(t, REQ(.numa = 1));
    cr_assert_str_eq(cpus_of(&p.cpus), socket_cpus[1]);
    cr_assert_str_eq(p.nic, "mlx5_2:1");
    cr_assert_eq(p.nic_dist, ADAG_TOPO_SAME_NUMA);
    cr_assert_eq(p.given, ADAG_PLACE_GIVEN_NUMA);
    adag__topo_free(t);
}

Test(place, overrides_win)
{
    adag_topo_t *t = load(TOPO_FILE("server-2s8g4n.xml"));
    adag_place_t p = place_ok(t, REQ(.gpu = 5, .cpus = "0-3"));
    cr_assert_str_eq(cpus_of(&p.cpus), "0-3");
    cr_assert_eq(p.numa, 1, "memory still on the GPU's node");
    cr_assert_str_eq(p.nic, "mlx5_2:1");
    p = place_ok(t, REQ(.gpu = 7, .nic = "mlx5_0"));
    cr_assert_str_eq(p.nic, "mlx5_0:1");
    cr_assert_eq(p.nic_dist, ADAG_TOPO_ACROSS_SOCKETS);
    cr_assert_str_eq(cpus_of(&p.cpus), socket_cpus[1]);
    p = place_ok(t, REQ(.gpu = 7, .nic = ""));
    cr_assert(!p.nic[0], "\"\": UCX chooses");
    p = place_ok(t, REQ(.gpu = 7, .nic = "eno1"));
    cr_assert_str_eq(p.nic, "eno1");
    p = place_ok(t, REQ(.gpu = 2, .numa = 1));
    cr_assert(p.numa == 1 && !strcmp(cpus_of(&p.cpus), socket_cpus[1]));
    p = place_ok(t, REQ(.gpu = 2, .numa = -1, .numa_given = 1));
    cr_assert_eq(p.numa, -1, "numa -1 given: memory on no node");
    /* automatic off (ADAG_PLACEMENT=0): only what was asked */
    p = place_ok(t, REQ(.gpu = 3, .automatic = 0));
    cr_assert(!p.bound && p.numa == -1 && !p.nic[0]);
    p = place_ok(t, REQ(.gpu = 3, .automatic = 0, .cpus = "8"));
    cr_assert(p.bound && !strcmp(cpus_of(&p.cpus), "8") && !p.nic[0]);
    adag__topo_free(t);
}

Test(place, impossible_requests_fail)
{
    adag_topo_t *t = load(TOPO_FILE("server-2s8g4n.xml"));
    place_fails(t, REQ(.cpus = "60-70"), "names CPUs 64-70, outside");
    place_fails(t, REQ(.cpus = "x"), "is not a CPU list");
    place_fails(t, REQ(.numa = 2), "NUMA node 2 does not exist");
    place_fails(t, REQ(.numa = 2), "0, 1");
    place_fails(t, REQ(.nic = "mlx5_9"), "unknown NIC \"mlx5_9\"");
    place_fails(t, REQ(.nic = "mlx5_9"), "mlx5_0, mlx5_1, mlx5_2, mlx5_3, eno1");
    place_fails(t, REQ(.nic = "mlx5_0:9"), "the port after ':' must be");
    place_fails(t, REQ(.gpu = 8), "GPU 8 is not in the topology");
    adag__topo_free(t);
}

/* mlx5_1's port is down: GPUs 2 and 3 fall back to the next closest NIC
 * with an active port, and asking for mlx5_1 fails. */
Test(place, down_port_is_skipped)
{
    adag_topo_t *t = load(TOPO_FILE("server-2s8g4n-downport.xml"));
    cr_assert(strstr(t->rdma_note, "4 RDMA devices, 3 with an active port"), "%s",
              t->rdma_note);
    for (int k = 2; k < 4; k++) {
        adag_place_t p = place_ok(t, REQ(.gpu = k));
        cr_assert_str_eq(p.nic, "mlx5_0:1", "gpu %d", k);
        cr_assert_eq(p.nic_dist, ADAG_TOPO_SAME_NUMA);
    }
    cr_assert_str_eq(place_ok(t, REQ(.gpu = 0)).nic, "mlx5_0:1");
    place_fails(t, REQ(.nic = "mlx5_1"), "NIC mlx5_1 has no active port");
    adag__topo_free(t);
}

/* The XML this module writes is one hwloc reads back, with the same map. */
Test(topo, export_round_trip)
{
    adag_topo_t *t = load(TOPO_FILE("server-2s8g4n.xml"));
    char path[] = "/tmp/adag-topo-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(adag__topo_export_xml(t, path), ADAG_OK, "%s", adag_last_error());
    adag_topo_t *u = load(path);
    unlink(path);
    cr_assert(u->ngpus == t->ngpus && u->nnics == t->nnics && u->nnuma == t->nnuma);
    for (unsigned k = 0; k < t->ngpus; k++)
        for (unsigned j = 0; j < t->nnics; j++)
            cr_assert_eq(adag__topo_dist(u, &u->gpus[k], &u->nics[j]),
                         adag__topo_dist(t, &t->gpus[k], &t->nics[j]));
    cr_assert_eq(adag__topo_export_xml(t, "/nonexistent/dir/x.xml"), ADAG_ERR_IO);
    cr_assert(strstr(adag_last_error(), "/nonexistent/dir/x.xml"), "%s", adag_last_error());
    adag__topo_free(u);
    adag__topo_free(t);
}

Test(topo, print_names_devices_and_distances)
{
    adag_topo_t *t = load(TOPO_FILE("server-2s8g4n.xml"));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    adag__topo_print(t, f);
    fclose(f);
    cr_assert(strstr(text, "2 packages, 2 NUMA nodes, 32 cores, 64 CPUs"), "%s", text);
    cr_assert(strstr(text, "GPUs: 8"), "%s", text);
    cr_assert(strstr(text, "mlx5_3"), "%s", text);
    cr_assert(strstr(text, "another machine"), "%s", text);
    cr_assert(strstr(text, "gpu7     system   system   numa     switch "), "%s", text);
    free(text);
    adag__topo_free(t);
}

Test(topo, bad_files_are_refused)
{
    adag_topo_t *t = NULL;
    cr_assert_eq(adag__topo_load("/nonexistent/t.xml", 0, &t), ADAG_ERR_IO);
    cr_assert(strstr(adag_last_error(), "/nonexistent/t.xml"), "%s", adag_last_error());
    cr_assert_null(t);
    char path[] = "/tmp/adag-topo-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "<topology>garbage", 17), 17);
    close(fd);
    cr_assert_eq(adag__topo_load(path, 0, &t), ADAG_ERR_IO);
    cr_assert(strstr(adag_last_error(), path), "%s", adag_last_error());
    unlink(path);
}

/* The live machine: a map of this system; with no RDMA device the verbs
 * part says so, and NIC choice stays UCX's. */
Test(topo, live_map)
{
    /* the process's map (never freed, as in a program: hwloc's PCI plugin
     * stays loaded, so its libpciaccess's one-off allocations are named
     * in a leak report and tests/lsan.supp can match them) */
    const adag_topo_t *t = NULL;
    unsetenv("ADAG_TOPO_XML");
    cr_assert_eq(adag__topo_get(&t), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(t->this_system, 1);
    cr_assert_geq(t->nnuma, 1);
    cpu_set_t mine;
    adag__cpus_allowed(&mine);
    cr_assert(CPU_EQUAL(&mine, &t->allowed), "allowed %s vs affinity %s", cpus_of(&t->allowed),
              cpus_of(&mine));
    unsigned rdma = 0;
    for (unsigned j = 0; j < t->nnics; j++)
        rdma += t->nics[j].rdma != 0;
    if (rdma == 0) {
        cr_assert(strncmp(t->rdma_note, "no RDMA devices", 15) == 0, "%s", t->rdma_note);
        adag_place_t p = place_ok(t, REQ(.numa = t->numa[0].os_index));
        cr_assert(!p.nic[0], "no RDMA NIC here: UCX chooses");
    }
}

/* The value of UCX_NET_DEVICES in the configuration this process's UCP
 * context would be made with now (transport/ucx_domain.c), into buf. */
static const char *ucx_net_devices(char *buf, size_t len)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    cr_assert(f);
    cr_assert_eq(adag__ucx_config_print(f), ADAG_OK, "%s", adag_last_error());
    fclose(f);
    const char *line = strstr(text, "UCX_NET_DEVICES=");
    cr_assert(line, "no UCX_NET_DEVICES in UCX's configuration:\n%s", text);
    line += strlen("UCX_NET_DEVICES=");
    snprintf(buf, len, "%.*s", (int)strcspn(line, "\n"), line);
    free(text);
    return buf;
}

/* UCX is told the placement's NIC (in the configuration of its context,
 * not the environment), unless the user chose one; nothing for a map of
 * another machine. */
Test(place, nic_goes_to_ucx_unless_the_user_chose)
{
    char dev[64], ucx_default[64];
    adag_place_t p;
    adag__place_none(&p);
    snprintf(p.nic, sizeof(p.nic), "mlx5_2:1");
    unsetenv("UCX_NET_DEVICES");
    ucx_net_devices(ucx_default, sizeof(ucx_default));
    cr_assert_str_neq(ucx_default, "mlx5_2:1");
    p.this_system = 0;
    cr_assert_null(adag__place_nic(&p), "another machine's NIC is not this one's");
    adag__ucx_use_net_device(adag__place_nic(&p));
    cr_assert_str_eq(ucx_net_devices(dev, sizeof(dev)), ucx_default);
    p.this_system = 1;
    adag__ucx_use_net_device(adag__place_nic(&p));
    cr_assert_str_eq(ucx_net_devices(dev, sizeof(dev)), "mlx5_2:1");
    cr_assert_null(getenv("UCX_NET_DEVICES"), "the environment is left alone");
    setenv("UCX_NET_DEVICES", "eth0", 1);
    cr_assert_str_eq(ucx_net_devices(dev, sizeof(dev)), "eth0", "the user's choice wins");
    setenv("UCX_NET_DEVICES", "", 1);
    cr_assert_str_eq(ucx_net_devices(dev, sizeof(dev)), "mlx5_2:1", "an empty one is no choice");
    unsetenv("UCX_NET_DEVICES");
    p.nic[0] = '\0';
    cr_assert_null(adag__place_nic(&p));
    adag__ucx_use_net_device(adag__place_nic(&p));
    cr_assert_str_eq(ucx_net_devices(dev, sizeof(dev)), ucx_default,
                     "no NIC chosen: UCX's own choice");
}

/* hwloc's own DGX-2 topology (tests/topo/hwloc-dgx2.xml): 16 GPUs, 8 per
 * socket, no NIC. Every GPU actor gets its own socket's CPUs and node. */
Test(place, dgx2_gpus_get_their_socket)
{
    adag_topo_t *t = load(TOPO_FILE("hwloc-dgx2.xml"));
    cr_assert_eq(t->ngpus, 16);
    cr_assert_eq(t->nnuma, 2);
    for (int k = 0; k < 16; k++) {
        adag_place_t p = place_ok(t, REQ(.gpu = k));
        int node = k < 8 ? 0 : 1;
        cr_assert_eq(p.numa, node, "gpu %d (%s)", k, t->gpus[k].bus_id);
        cr_assert_str_eq(cpus_of(&p.cpus), node ? "24-25" : "0-1", "gpu %d", k);
        cr_assert(!p.nic[0], "no NIC in the file: UCX chooses");
        if (k)
            cr_assert_lt(strcmp(t->gpus[k - 1].bus_id, t->gpus[k].bus_id), 0);
    }
    /* GPUs of one socket share no PCI switch with the other socket's */
    cr_assert_eq(adag__topo_dist(t, &t->gpus[0], &t->gpus[8]), ADAG_TOPO_ACROSS_SOCKETS);
    cr_assert_lt(adag__topo_dist(t, &t->gpus[0], &t->gpus[1]), ADAG_TOPO_SAME_NUMA);
    adag__topo_free(t);
}
