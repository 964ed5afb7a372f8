/* The settings table and what reads, checks, copies and prints it: see
 * common/settings.h. */
#include "common/settings.h"

#include "common/error.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SETTING_SECRET: a string never printed (adag-info -c says whether it is set)
 * nor sent to workers */
typedef enum { SETTING_INT, SETTING_STRING, SETTING_SECRET } setting_type_t;
/* SCOPE_RUNTIME: a field of adag_settings_t; SCOPE_PROCESS: of adag_process_settings_t */
typedef enum { SCOPE_RUNTIME, SCOPE_PROCESS } setting_scope_t;

typedef struct {
    const char *name;
    setting_type_t type;
    const char *default_value; /* as text; NULL = unset */
    int64_t min, max;          /* for SETTING_INT */
    setting_scope_t scope;
    size_t offset;             /* into the struct of its scope */
    const char *description;
} setting_def_t;

#define RT(f) SCOPE_RUNTIME, offsetof(adag_settings_t, f)
#define PROC(f) SCOPE_PROCESS, offsetof(adag_process_settings_t, f)

static const setting_def_t setting_table[] = {
    {"ADAG_WORKER_PATH", SETTING_STRING, NULL, 0, 0, RT(worker_path),
     "adag-worker executable for process actors (default: next to libadag)"},
    {"ADAG_CUDART_PATH", SETTING_STRING, NULL, 0, 0, PROC(cudart_path),
     "CUDA runtime the cuda device backend loads (default: libcudart.so.13, .so.12, .so)"},
    {"ADAG_NCCL_PATH", SETTING_STRING, NULL, 0, 0, PROC(nccl_path),
     "NCCL library the nccl communicator backend loads (default: libnccl.so.2, then next "
     "to the CUDA runtime)"},
    {"ADAG_SPIN_NS", SETTING_INT, "100000", 0, 1000000000, RT(spin_ns),
     "most a channel wait spins before sleeping on a futex (ns); adaptive below it"},
    {"ADAG_SPIN_NS_CROWDED", SETTING_INT, "50000", 0, 1000000000, RT(spin_ns_crowded),
     "the same, yielding the CPU between probes, for a DAG with more loops than CPUs, and "
     "for the emulated device's stream threads and stream_sync"},
    {"ADAG_MAX_INFLIGHT", SETTING_INT, "8", 1, 4096, RT(max_inflight),
     "default executions in flight per compiled DAG"},
    {"ADAG_SLOT_CAPACITY", SETTING_INT, "1048576", 1, (int64_t)1 << 40, RT(slot_capacity),
     "default bytes per channel slot"},
    {"ADAG_EXECUTE_TIMEOUT_MS", SETTING_INT, "60000", -1, INT32_MAX, RT(execute_timeout_ms),
     "default time a blocking execute waits for room (-1: forever)"},
    {"ADAG_TEARDOWN_TIMEOUT_MS", SETTING_INT, "5000", 0, INT32_MAX, RT(teardown_timeout_ms),
     "time teardown waits for workers before killing them"},
    {"ADAG_CONTROL_TIMEOUT_MS", SETTING_INT, "120000", 1, INT32_MAX, RT(control_timeout_ms),
     "time a control request (create actor, install DAG) may take"},
    {"ADAG_COMM_TIMEOUT_MS", SETTING_INT, "60000", -1, INT32_MAX, RT(comm_timeout_ms),
     "default time a device communication op (copy, send/recv, waiting for a peer's value) "
     "may take before its DAG fails with ADAG_ERR_TIMEOUT (0 or -1: not watched)"},
    {"ADAG_LOG_LEVEL", SETTING_INT, "1", 0, 4, PROC(log_level),
     "0 silent, 1 errors, 2 warnings, 3 info, 4 debug (to stderr)"},
    {"ADAG_EMU_DEVICES", SETTING_INT, "4", 0, 64, PROC(emu_devices),
     "emulated devices, emu:0.. (memfd memory, stream threads)"},
    {"ADAG_EMU_COPY_MBPS", SETTING_INT, "0", 0, 1000000000, RT(emu_copy_mbps),
     "bandwidth of the emulated devices' copies (copy_async, every direction) in MB/s (10^6 "
     "bytes): a copy of n bytes takes at least n / bandwidth, its stream thread sleeping "
     "what the memmove left, to model a PCIe or NVLink link; 0: as fast as memmove"},
    {"ADAG_DEVICE_MEMOPS", SETTING_INT, "1", 0, 1, RT(device_memops),
     "device channels hand a value between two processes' device streams by stream memory "
     "operations on words in the channel's ring where both devices support them (1), or "
     "always by IPC events (0)"},
    {"ADAG_TOKEN_FILE", SETTING_STRING, NULL, 0, 0, RT(token_file),
     "file holding the token that remote workers and their agents check (mode 0600 or "
     "0400, owned by this user); preferred to ADAG_TOKEN"},
    {"ADAG_TOKEN", SETTING_SECRET, NULL, 0, 0, RT(token),
     "the token itself (at most 256 bytes), when no ADAG_TOKEN_FILE is set; never printed"},
    {"ADAG_HOSTS", SETTING_STRING, NULL, 0, 0, RT(hosts),
     "names for agents, \"name=host:port,name=host:port\": an actor's host may be one of "
     "the names; `adag-worker --pmix` sets it for its driver, naming each rank's agent by "
     "its rank (\"1\", \"2\", ...)"},
    {"ADAG_REMOTE_TIMEOUT_MS", SETTING_INT, "5000", 1000, 600000, RT(remote_timeout_ms),
     "a silent or cut link to a remote worker (or its driver) fails after this long (TCP "
     "keepalive probes each second, and the same bound on unacknowledged data)"},
    {"ADAG_AGENT_AUTH_TIMEOUT_MS", SETTING_INT, "5000", 100, 600000,
     PROC(agent_auth_timeout_ms),
     "an agent (adag-worker --agent) refuses and drops a connection whose HELLO has not "
     "arrived within this long; the agent reads it, the driver does not"},
    {"ADAG_DATA_CACHE_DIR", SETTING_STRING, NULL, 0, 0, RT(data_cache_dir),
     "the data stage's cache of http(s) shards (default $XDG_CACHE_HOME/adag/shards, else "
     "~/.cache/adag/shards); created 0700, shared by processes through file locks"},
    {"ADAG_DATA_CACHE_BYTES", SETTING_INT, "10737418240", 1048576, (int64_t)1 << 50,
     RT(data_cache_bytes),
     "bytes the shard cache keeps; least recently used shards no source uses are evicted"},
    {"ADAG_DATA_FETCHES", SETTING_INT, "4", 1, 64, RT(data_fetches),
     "http(s) shards a data source fetches at once"},
    {"ADAG_DATA_HTTP_RETRIES", SETTING_INT, "4", 0, 20, RT(data_http_retries),
     "retries of a shard fetch that failed transiently (no connection, cut transfer, "
     "timeout, HTTP 408/429/5xx), with backoff from 200 ms doubling to 5 s"},
    {"ADAG_DATA_HTTP_TIMEOUT_MS", SETTING_INT, "30000", 100, 3600000,
     RT(data_http_timeout_ms),
     "a shard fetch's try fails (and is retried) when connecting takes this long, or a "
     "transfer receives nothing for this long"},
    {"ADAG_TRACE_SPANS", SETTING_INT, "0", 0, 1 << 20, RT(trace_spans),
     "default trace records each actor loop and the driver keep for adag_dag_write_trace (an "
     "op's wait, compute, room and publish make one; 0: tracing off; rounded up to a power of "
     "two); traced DAGs also time their statistics"},
    {"ADAG_LIVE", SETTING_INT, "0", 0, 1, RT(live),
     "1: every runtime opens its live view at creation (a 0600 unix socket in "
     "$XDG_RUNTIME_DIR/adag or /tmp/adag-<uid>) for `adag-info attach`"},
    {"ADAG_STATS_TIMEOUT_MS", SETTING_INT, "1000", 1, 600000, RT(stats_timeout_ms),
     "how long statistics, the trace and the live view wait for the actors' answers (all "
     "asked at once); one that has not answered by then is named as such, the others' "
     "figures are given"},
    {"ADAG_PLACEMENT", SETTING_INT, "1", 0, 1, RT(placement),
     "1: place each actor by the topology (a GPU actor on the CPUs and NUMA node of its "
     "GPU, UCX on the nearest RDMA NIC), and loader threads next to the first stage; 0: "
     "bind nothing (an actor's explicit cpus/numa/nic still apply)"},
    {"ADAG_TOPO_XML", SETTING_STRING, NULL, 0, 0, PROC(topo_xml),
     "an hwloc XML file to use as the machine's topology instead of the live one (export "
     "one with `adag-info topo --xml FILE`); placements are computed from it, and bound "
     "only with ADAG_TOPO_XML_THIS_SYSTEM=1"},
    {"ADAG_TOPO_XML_THIS_SYSTEM", SETTING_INT, "0", 0, 1, PROC(topo_xml_this_system),
     "1: the ADAG_TOPO_XML file describes this machine, so its CPUs and NUMA nodes are "
     "bound as it says"},
};

#define NSETTINGS (sizeof(setting_table) / sizeof(setting_table[0]))

static const setting_def_t *find_def(const char *name)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (strcmp(setting_table[i].name, name) == 0)
            return &setting_table[i];
    return NULL;
}

/* An integer of the table's bounds for def; else -1 and why. */
static int parse_int(const setting_def_t *def, const char *text, int64_t *out, char *why,
                     size_t len)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 0);
    if (errno || end == text || *end != '\0' || v < def->min || v > def->max) {
        snprintf(why, len, "not an integer in [%" PRId64 ", %" PRId64 "]", def->min, def->max);
        return -1;
    }
    *out = v;
    return 0;
}

static int64_t default_int(const setting_def_t *def)
{
    char why[8];
    int64_t v = 0;
    (void)parse_int(def, def->default_value, &v, why, sizeof(why));
    return v;
}

static int64_t *int_field(const setting_def_t *def, void *base)
{
    return (int64_t *)((char *)base + def->offset);
}

static char **str_field(const setting_def_t *def, void *base)
{
    return (char **)((char *)base + def->offset);
}

/* Sets def's field of base from text ("" or NULL: the default); -1 and
 * why when the table refuses it, -2 when out of memory; base unchanged
 * then. */
static int assign(const setting_def_t *def, void *base, const char *text, char *why, size_t len)
{
    if (text && !*text)
        text = NULL;
    if (def->type == SETTING_INT) {
        int64_t v = default_int(def);
        if (text && parse_int(def, text, &v, why, len) != 0)
            return -1;
        *int_field(def, base) = v;
        return 0;
    }
    const char *v = text ? text : def->default_value;
    char *copy = NULL;
    if (v && strlen(v) > ADAG_SETTING_TEXT_MAX) {
        snprintf(why, len, "longer than %d bytes", ADAG_SETTING_TEXT_MAX);
        return -1;
    }
    if (v && !(copy = strdup(v)))
        return -2;
    free(*str_field(def, base));
    *str_field(def, base) = copy;
    return 0;
}

/* Fills every field of `scope` in base with its default, then (env) with
 * the environment's value; a refused value keeps the default and is
 * reported through warn (NULL: silently). -1 when out of memory. */
static int load(setting_scope_t scope, void *base, int env,
                void (*warn)(const char *name, const char *text, const char *why))
{
    char why[128];
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting_def_t *def = &setting_table[i];
        if (def->scope != scope)
            continue;
        if (def->type != SETTING_INT)
            *str_field(def, base) = NULL;
        if (assign(def, base, NULL, why, sizeof(why)) != 0)
            return -1;
        const char *text = env ? getenv(def->name) : NULL;
        if (!text || !*text)
            continue;
        int r = assign(def, base, text, why, sizeof(why));
        if (r == -2)
            return -1;
        if (r == -1 && warn)
            warn(def->name, text, why);
    }
    return 0;
}

static void free_scope(setting_scope_t scope, void *base)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (setting_table[i].scope == scope && setting_table[i].type != SETTING_INT) {
            free(*str_field(&setting_table[i], base));
            *str_field(&setting_table[i], base) = NULL;
        }
}

static void warn_log(const char *name, const char *text, const char *why)
{
    ADAG_LOG_WARN("ignoring %s=%s: %s", name, text, why);
}

adag_status_t adag__settings_defaults(adag_settings_t *out)
{
    memset(out, 0, sizeof(*out));
    if (load(SCOPE_RUNTIME, out, 0, NULL) != 0) {
        adag__settings_free(out);
        return adag__error(ADAG_ERR_NO_MEMORY, "settings: out of memory");
    }
    return ADAG_OK;
}

adag_status_t adag__settings_from_env(adag_settings_t *out)
{
    memset(out, 0, sizeof(*out));
    if (load(SCOPE_RUNTIME, out, 1, warn_log) != 0) {
        adag__settings_free(out);
        return adag__error(ADAG_ERR_NO_MEMORY, "settings: out of memory");
    }
    return ADAG_OK;
}

adag_status_t adag__settings_copy(adag_settings_t *dst, const adag_settings_t *src)
{
    *dst = *src;
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting_def_t *def = &setting_table[i];
        if (def->scope != SCOPE_RUNTIME || def->type == SETTING_INT)
            continue;
        char **f = str_field(def, dst);
        if (*f && !(*f = strdup(*f))) {
            /* the fields after this one still point into src */
            for (size_t j = i + 1; j < NSETTINGS; j++)
                if (setting_table[j].scope == SCOPE_RUNTIME &&
                    setting_table[j].type != SETTING_INT)
                    *str_field(&setting_table[j], dst) = NULL;
            adag__settings_free(dst);
            return adag__error(ADAG_ERR_NO_MEMORY, "settings: out of memory");
        }
    }
    return ADAG_OK;
}

void adag__settings_free(adag_settings_t *s)
{
    if (s)
        free_scope(SCOPE_RUNTIME, s);
}

adag_status_t adag__settings_set(adag_settings_t *s, const char *name, const char *value,
                                const char *fn)
{
    const setting_def_t *def = find_def(name);
    char why[128];
    if (!def)
        return adag__error(ADAG_ERR_NOT_FOUND,
                          "%s: there is no setting %.80s (`adag-info -c` lists them)", fn, name);
    if (def->scope == SCOPE_PROCESS)
        return adag__error(ADAG_ERR_INVALID,
                          "%s: %s is process-wide: each process reads it from its environment "
                          "once, so set it there (before the first adag call)",
                          fn, name);
    int r = assign(def, s, value, why, sizeof(why));
    if (r == -2)
        return adag__error(ADAG_ERR_NO_MEMORY, "%s: %s: out of memory", fn, name);
    if (r == -1)
        return adag__error(ADAG_ERR_INVALID, "%s: %s=%.80s: %s", fn, name, value, why);
    return ADAG_OK;
}

int64_t adag__settings_env_int(const char *name)
{
    const setting_def_t *def = find_def(name);
    char why[128];
    if (!def || def->type != SETTING_INT)
        return 0;
    int64_t v = default_int(def);
    const char *text = getenv(name);
    if (text && *text)
        (void)parse_int(def, text, &v, why, sizeof(why));
    return v;
}

void adag__settings_each_sent(const adag_settings_t *s,
                             void (*fn)(void *ctx, const char *name, const char *value),
                             void *ctx)
{
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting_def_t *def = &setting_table[i];
        if (def->scope != SCOPE_RUNTIME || def->type == SETTING_SECRET)
            continue;
        if (def->type == SETTING_STRING) {
            const char *v = *str_field(def, (void *)s);
            fn(ctx, def->name, v ? v : "");
        } else {
            char num[32];
            snprintf(num, sizeof(num), "%" PRId64, *int_field(def, (void *)s));
            fn(ctx, def->name, num);
        }
    }
}

adag_status_t adag__settings_get(const adag_settings_t *s, const char *name, char *buf,
                                size_t len, size_t *needed, const char *fn)
{
    const setting_def_t *def = find_def(name);
    if (!def)
        return adag__error(ADAG_ERR_NOT_FOUND,
                          "%s: there is no setting %.80s (`adag-info -c` lists them)", fn, name);
    if (def->type == SETTING_SECRET)
        return adag__error(ADAG_ERR_INVALID, "%s: %s is secret: it is never read back", fn,
                          name);
    const void *base = def->scope == SCOPE_RUNTIME ? (const void *)s
                                                   : (const void *)adag__process_settings();
    char num[32];
    const char *v = num;
    if (def->type == SETTING_INT)
        snprintf(num, sizeof(num), "%" PRId64, *int_field(def, (void *)base));
    else if (!(v = *str_field(def, (void *)base)))
        v = "";
    size_t n = strlen(v) + 1;
    if (needed)
        *needed = n;
    if (len)
        snprintf(buf, len, "%s", v);
    if (n > len)
        return adag__error(ADAG_ERR_TOO_LARGE, "%s: %s takes %zu bytes, the buffer has %zu", fn,
                          name, n, len);
    return ADAG_OK;
}

/* ---- the process's settings ---- */

static adag_process_settings_t process_settings;
static pthread_once_t process_once = PTHREAD_ONCE_INIT;
/* Refused environment values, said once the settings are in place (the log
 * reads the level from them: it cannot be called while they load). */
static char process_warnings[1024];
static atomic_int process_warned;

static void process_warn(const char *name, const char *text, const char *why)
{
    size_t n = strlen(process_warnings);
    snprintf(process_warnings + n, sizeof(process_warnings) - n, "%signoring %.64s=%.64s: %s",
             n ? "; " : "", name, text, why);
}

static void process_load(void)
{
    /* out of memory: the strings that could not be copied stay unset */
    (void)load(SCOPE_PROCESS, &process_settings, 1, process_warn);
}

const adag_process_settings_t *adag__process_settings(void)
{
    pthread_once(&process_once, process_load);
    /* once: the first caller after the load says it (relaxed: only which
     * caller says it is decided here; the text was written in the once) */
    if (process_warnings[0] &&
        atomic_exchange_explicit(&process_warned, 1, memory_order_relaxed) == 0)
        ADAG_LOG_WARN("%s", process_warnings);
    return &process_settings;
}

/* ---- printing ---- */

typedef struct {
    char *buf;
    size_t len, pos; /* pos: the whole text's length so far */
} text_t;

static void put(text_t *t, const char *fmt, ...) ADAG_PRINTF(2, 3);

static void put(text_t *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->pos < t->len ? t->len - t->pos : 0;
    int n = vsnprintf(room ? t->buf + t->pos : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->pos += (size_t)n;
}

size_t adag__settings_format(const adag_settings_t *s, char *buf, size_t len)
{
    const adag_process_settings_t *p = adag__process_settings();
    text_t t = {buf, len, 0};
    if (len)
        buf[0] = '\0';
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting_def_t *def = &setting_table[i];
        void *base = def->scope == SCOPE_RUNTIME ? (void *)s : (void *)p;
        const char *dflt = def->default_value ? def->default_value : "(unset)";
        const char *scope = def->scope == SCOPE_PROCESS ? "; process-wide" : "";
        if (def->type == SETTING_INT) {
            put(&t, "%-26s = %-12" PRId64 " (default %s%s)\n", def->name, *int_field(def, base),
                dflt, scope);
        } else {
            const char *v = *str_field(def, base);
            if (def->type == SETTING_SECRET)
                v = v ? "(set, hidden)" : NULL;
            put(&t, "%-26s = %-12s (default %s%s)\n", def->name, v ? v : "(unset)", dflt,
                scope);
        }
        put(&t, "    %s\n", def->description);
    }
    return t.pos;
}
