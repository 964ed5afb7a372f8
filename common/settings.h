/*
 * The one table of ADAG_* settings (common/settings.c): each with its type,
 * bounds, default and description; `adag-info -c` and adag_config_print
 * list them. Two scopes:
 *
 *   runtime  each runtime has its own values (adag_settings_t): those of
 *            the adag_config_h it was created with (adag_runtime_params_t.
 *            config), else the environment's when it was created. Its
 *            DAGs, channels and actors use them; a worker receives them in
 *            CREATE_ACTOR (transport/protocol.h) and uses those, not its
 *            own environment. Code reaches them through its object (the
 *            runtime, a DAG's runtime, a loop's actor, a worker), never
 *            through a global.
 *   process  read from the environment once per process, at first use
 *            (adag_process_settings_t): what is loaded or decided once for
 *            the whole process -- the device libraries dlopen'ed once
 *            (ADAG_CUDART_PATH, ADAG_NCCL_PATH), the log level (logging
 *            has no runtime), the emulated backend's device count (what
 *            adag_device_count reports, like CUDA_VISIBLE_DEVICES), the
 *            machine's topology (loaded once and shared), and the agent's
 *            authentication timeout (the agent has no runtime). A config
 *            lists them but refuses to modify them.
 */
#ifndef ADAG_COMMON_SETTINGS_H
#define ADAG_COMMON_SETTINGS_H

#include <adag.h>
#include <stddef.h>
#include <stdint.h>

/* The longest value a setting takes, in bytes (a longer string from the
 * environment is warned about and ignored, one given to modify refused):
 * what CREATE_ACTOR carries is bounded by it. */
#define ADAG_SETTING_TEXT_MAX 65535
#define ADAG_SETTING_NAME_MAX 64 /* names are shorter */

/* A runtime's settings. Strings are owned (adag__settings_free); NULL: unset. */
typedef struct {
    char *worker_path;           /* ADAG_WORKER_PATH */
    int64_t spin_ns;             /* ADAG_SPIN_NS */
    int64_t spin_ns_crowded;     /* ADAG_SPIN_NS_CROWDED */
    int64_t max_inflight;        /* ADAG_MAX_INFLIGHT */
    int64_t slot_capacity;       /* ADAG_SLOT_CAPACITY */
    int64_t execute_timeout_ms;  /* ADAG_EXECUTE_TIMEOUT_MS */
    int64_t teardown_timeout_ms; /* ADAG_TEARDOWN_TIMEOUT_MS */
    int64_t control_timeout_ms;  /* ADAG_CONTROL_TIMEOUT_MS */
    int64_t comm_timeout_ms;     /* ADAG_COMM_TIMEOUT_MS */
    int64_t emu_copy_mbps;      /* ADAG_EMU_COPY_MBPS */
    int64_t device_memops;       /* ADAG_DEVICE_MEMOPS */
    char *token_file;            /* ADAG_TOKEN_FILE */
    char *token;                 /* ADAG_TOKEN */
    char *hosts;                 /* ADAG_HOSTS */
    int64_t remote_timeout_ms;   /* ADAG_REMOTE_TIMEOUT_MS */
    char *data_cache_dir;        /* ADAG_DATA_CACHE_DIR */
    int64_t data_cache_bytes;    /* ADAG_DATA_CACHE_BYTES */
    int64_t data_fetches;        /* ADAG_DATA_FETCHES */
    int64_t data_http_retries;   /* ADAG_DATA_HTTP_RETRIES */
    int64_t data_http_timeout_ms; /* ADAG_DATA_HTTP_TIMEOUT_MS */
    int64_t trace_spans;         /* ADAG_TRACE_SPANS */
    int64_t live;                /* ADAG_LIVE */
    int64_t stats_timeout_ms;    /* ADAG_STATS_TIMEOUT_MS */
    int64_t placement;           /* ADAG_PLACEMENT */
} adag_settings_t;

/* The process's settings (read once). */
typedef struct {
    char *cudart_path;            /* ADAG_CUDART_PATH */
    char *nccl_path;              /* ADAG_NCCL_PATH */
    int64_t log_level;            /* ADAG_LOG_LEVEL */
    int64_t emu_devices;         /* ADAG_EMU_DEVICES */
    int64_t agent_auth_timeout_ms; /* ADAG_AGENT_AUTH_TIMEOUT_MS */
    char *topo_xml;               /* ADAG_TOPO_XML */
    int64_t topo_xml_this_system; /* ADAG_TOPO_XML_THIS_SYSTEM */
} adag_process_settings_t;

/* What an adag_config_h is (common/config.c). */
struct adag_config {
    adag_settings_t settings;
};

/* The table's defaults (no environment). ADAG_ERR_NO_MEMORY, or ADAG_OK. */
adag_status_t adag__settings_defaults(adag_settings_t *out);
/* The environment's values now, over the defaults; a value the table
 * refuses is warned about (naming it and why) and its default kept. */
adag_status_t adag__settings_from_env(adag_settings_t *out);
adag_status_t adag__settings_copy(adag_settings_t *dst, const adag_settings_t *src);
void adag__settings_free(adag_settings_t *s);

/* Sets runtime setting `name` from its text (an integer in the table's
 * bounds, or a string; "" restores the default, as an empty environment
 * variable does), `fn` prefixing the message. ADAG_ERR_NOT_FOUND for a
 * name the table does not have, ADAG_ERR_INVALID for a value it refuses
 * or a process-wide setting; s is unchanged then. */
adag_status_t adag__settings_set(adag_settings_t *s, const char *name, const char *value,
                                const char *fn);

/* Setting `name` of s (a process-wide one: the process's) as text into
 * buf[0..len), as adag_config_get says (include/adag.h), `fn` prefixing
 * the message. */
adag_status_t adag__settings_get(const adag_settings_t *s, const char *name, char *buf,
                                size_t len, size_t *needed, const char *fn);

/* An integer runtime setting as the environment gives it now (the default
 * when unset or refused, silently): what a device or communicator opened
 * outside any runtime starts with. 0 for a name that is not one. */
int64_t adag__settings_env_int(const char *name);

/* Calls fn with every runtime setting a worker receives (all but the
 * secret ADAG_TOKEN), its value as text: "" for an unset string. */
void adag__settings_each_sent(const adag_settings_t *s,
                             void (*fn)(void *ctx, const char *name, const char *value),
                             void *ctx);

/* Every setting, one entry each: "NAME = value (default D)" (process-wide
 * ones say so, with the process's value), then its description. Writes at
 * most len bytes, NUL-terminated when len > 0; returns the length of the
 * whole text (without its NUL), like snprintf. */
size_t adag__settings_format(const adag_settings_t *s, char *buf, size_t len);

/* The process-wide settings (read once, thread-safe). */
const adag_process_settings_t *adag__process_settings(void);

#endif
