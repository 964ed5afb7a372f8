#include "common/settings.h"

#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* SETTING_SECRET: a string never printed (adag-info -c says whether it is set) */
typedef enum { SETTING_INT, SETTING_STRING, SETTING_SECRET } setting_type_t;

typedef struct {
    const char *name;
    setting_type_t type;
    const char *default_value; /* as text; NULL = unset */
    int64_t min, max;          /* for SETTING_INT */
    size_t offset;             /* into adag_settings_t */
    const char *description;
} setting_def_t;

#define FIELD(f) offsetof(adag_settings_t, f)

static const setting_def_t setting_table[] = {
    {"ADAG_WORKER_PATH", SETTING_STRING, NULL, 0, 0, FIELD(worker_path),
     "adag-worker executable for process actors (default: next to libadag)"},
    {"ADAG_CUDART_PATH", SETTING_STRING, NULL, 0, 0, FIELD(cudart_path),
     "CUDA runtime the cuda device backend loads (default: libcudart.so.13, .so.12, .so)"},
    {"ADAG_NCCL_PATH", SETTING_STRING, NULL, 0, 0, FIELD(nccl_path),
     "NCCL library the nccl communicator backend loads (default: libnccl.so.2, then next "
     "to the CUDA runtime)"},
    {"ADAG_SPIN_NS", SETTING_INT, "100000", 0, 1000000000, FIELD(spin_ns),
     "most a channel wait spins before sleeping on a futex (ns); adaptive below it"},
    {"ADAG_SPIN_NS_CROWDED", SETTING_INT, "50000", 0, 1000000000, FIELD(spin_ns_crowded),
     "the same, yielding the CPU between probes, for a DAG with more loops than CPUs, and "
     "for the host device's stream threads and stream_sync"},
    {"ADAG_MAX_INFLIGHT", SETTING_INT, "8", 1, 4096, FIELD(max_inflight),
     "default executions in flight per compiled DAG"},
    {"ADAG_SLOT_CAPACITY", SETTING_INT, "1048576", 1, (int64_t)1 << 40, FIELD(slot_capacity),
     "default bytes per channel slot"},
    {"ADAG_EXECUTE_TIMEOUT_MS", SETTING_INT, "60000", -1, INT32_MAX, FIELD(execute_timeout_ms),
     "default time a blocking execute waits for room (-1: forever)"},
    {"ADAG_TEARDOWN_TIMEOUT_MS", SETTING_INT, "5000", 0, INT32_MAX, FIELD(teardown_timeout_ms),
     "time teardown waits for workers before killing them"},
    {"ADAG_CONTROL_TIMEOUT_MS", SETTING_INT, "120000", 1, INT32_MAX, FIELD(control_timeout_ms),
     "time a control request (create actor, install DAG) may take"},
    {"ADAG_COMM_TIMEOUT_MS", SETTING_INT, "60000", -1, INT32_MAX, FIELD(comm_timeout_ms),
     "default time a device communication op (copy, send/recv, waiting for a peer's value) "
     "may take before its DAG fails with ADAG_ERR_TIMEOUT (0 or -1: not watched)"},
    {"ADAG_LOG_LEVEL", SETTING_INT, "1", 0, 4, FIELD(log_level),
     "0 silent, 1 errors, 2 warnings, 3 info, 4 debug (to stderr)"},
    {"ADAG_HOST_DEVICES", SETTING_INT, "4", 0, 64, FIELD(host_devices),
     "emulated devices of the host backend (memfd memory, stream threads)"},
    {"ADAG_HOST_COPY_MBPS", SETTING_INT, "0", 0, 1000000000, FIELD(host_copy_mbps),
     "bandwidth of the host backend's copies (copy_async, every direction) in MB/s (10^6 "
     "bytes): a copy of n bytes takes at least n / bandwidth, its stream thread sleeping "
     "what the memmove left, to model a PCIe or NVLink link; 0: as fast as memmove"},
    {"ADAG_TOKEN_FILE", SETTING_STRING, NULL, 0, 0, FIELD(token_file),
     "file holding the token that remote workers and their agents check (mode 0600 or "
     "0400, owned by this user); preferred to ADAG_TOKEN"},
    {"ADAG_TOKEN", SETTING_SECRET, NULL, 0, 0, FIELD(token),
     "the token itself (at most 256 bytes), when no ADAG_TOKEN_FILE is set; never printed"},
    {"ADAG_HOSTS", SETTING_STRING, NULL, 0, 0, FIELD(hosts),
     "names for agents, \"name=host:port,name=host:port\": an actor's host may be one of "
     "the names; `adag-worker --pmix` sets it for its driver, naming each rank's agent by "
     "its rank (\"1\", \"2\", ...)"},
    {"ADAG_REMOTE_TIMEOUT_MS", SETTING_INT, "5000", 1000, 600000, FIELD(remote_timeout_ms),
     "a silent or cut link to a remote worker (or its driver) fails after this long (TCP "
     "keepalive probes each second, and the same bound on unacknowledged data)"},
    {"ADAG_AGENT_AUTH_TIMEOUT_MS", SETTING_INT, "5000", 100, 600000,
     FIELD(agent_auth_timeout_ms),
     "an agent (adag-worker --agent) refuses and drops a connection whose HELLO has not "
     "arrived within this long; the agent reads it, the driver does not"},
    {"ADAG_DATA_CACHE_DIR", SETTING_STRING, NULL, 0, 0, FIELD(data_cache_dir),
     "the data stage's cache of http(s) shards (default $XDG_CACHE_HOME/adag/shards, else "
     "~/.cache/adag/shards); created 0700, shared by processes through file locks"},
    {"ADAG_DATA_CACHE_BYTES", SETTING_INT, "10737418240", 1048576, (int64_t)1 << 50,
     FIELD(data_cache_bytes),
     "bytes the shard cache keeps; least recently used shards no source uses are evicted"},
    {"ADAG_DATA_FETCHES", SETTING_INT, "4", 1, 64, FIELD(data_fetches),
     "http(s) shards a data source fetches at once"},
    {"ADAG_DATA_HTTP_RETRIES", SETTING_INT, "4", 0, 20, FIELD(data_http_retries),
     "retries of a shard fetch that failed transiently (no connection, cut transfer, "
     "timeout, HTTP 408/429/5xx), with backoff from 200 ms doubling to 5 s"},
    {"ADAG_DATA_HTTP_TIMEOUT_MS", SETTING_INT, "30000", 100, 3600000,
     FIELD(data_http_timeout_ms),
     "a shard fetch's try fails (and is retried) when connecting takes this long, or a "
     "transfer receives nothing for this long"},
    {"ADAG_TRACE_SPANS", SETTING_INT, "0", 0, 1 << 20, FIELD(trace_spans),
     "default trace records each actor loop and the driver keep for adag_dag_write_trace (an "
     "op's wait, compute, room and publish make one; 0: tracing off; rounded up to a power of "
     "two); traced DAGs also time their statistics"},
    {"ADAG_LIVE", SETTING_INT, "0", 0, 1, FIELD(live),
     "1: every runtime opens its live view at creation (a 0600 unix socket in "
     "$XDG_RUNTIME_DIR/adag or /tmp/adag-<uid>) for `adag-info attach`"},
    {"ADAG_STATS_TIMEOUT_MS", SETTING_INT, "1000", 1, 600000, FIELD(stats_timeout_ms),
     "how long statistics, the trace and the live view wait for the actors' answers (all "
     "asked at once); one that has not answered by then is named as such, the others' "
     "figures are given"},
    {"ADAG_PLACEMENT", SETTING_INT, "1", 0, 1, FIELD(placement),
     "1: place each actor by the topology (a GPU actor on the CPUs and NUMA node of its "
     "GPU, UCX on the nearest RDMA NIC), and loader threads next to the first stage; 0: "
     "bind nothing (an actor's explicit cpus/numa/nic still apply)"},
    {"ADAG_TOPO_XML", SETTING_STRING, NULL, 0, 0, FIELD(topo_xml),
     "an hwloc XML file to use as the machine's topology instead of the live one (export "
     "one with `adag-info topo --xml FILE`); placements are computed from it, and bound "
     "only with ADAG_TOPO_XML_THIS_SYSTEM=1"},
    {"ADAG_TOPO_XML_THIS_SYSTEM", SETTING_INT, "0", 0, 1, FIELD(topo_xml_this_system),
     "1: the ADAG_TOPO_XML file describes this machine, so its CPUs and NUMA nodes are "
     "bound as it says"},
};

#define NSETTINGS (sizeof(setting_table) / sizeof(setting_table[0]))

static adag_settings_t settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

static int parse_int(const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 0);
    if (errno || end == text || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

static void settings_load(void)
{
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting_def_t *def = &setting_table[i];
        const char *env = getenv(def->name);
        void *field = (char *)&settings + def->offset;
        if (def->type != SETTING_INT) {
            const char *v = env && *env ? env : def->default_value;
            *(const char **)field = v ? strdup(v) : NULL;
            continue;
        }
        int64_t v = 0;
        parse_int(def->default_value, &v);
        if (env && *env) {
            int64_t parsed;
            if (parse_int(env, &parsed) || parsed < def->min || parsed > def->max)
                ADAG_LOG_WARN("ignoring %s=%s: not an integer in [%lld, %lld]", def->name, env,
                              (long long)def->min, (long long)def->max);
            else
                v = parsed;
        }
        *(int64_t *)field = v;
    }
}

const adag_settings_t *adag_settings(void)
{
    pthread_once(&settings_once, settings_load);
    return &settings;
}

void adag_settings_print(FILE *out)
{
    const adag_settings_t *s = adag_settings();
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting_def_t *def = &setting_table[i];
        const void *field = (const char *)s + def->offset;
        if (def->type == SETTING_SECRET) {
            const char *v = *(const char *const *)field;
            fprintf(out, "%-26s = %-12s (default (unset))\n", def->name,
                    v ? "(set, hidden)" : "(unset)");
        } else if (def->type == SETTING_STRING) {
            const char *v = *(const char *const *)field;
            fprintf(out, "%-26s = %-12s (default %s)\n", def->name, v ? v : "(unset)",
                    def->default_value ? def->default_value : "(unset)");
        } else {
            fprintf(out, "%-26s = %-12lld (default %s)\n", def->name,
                    (long long)*(const int64_t *)field, def->default_value);
        }
        fprintf(out, "    %s\n", def->description);
    }
}
