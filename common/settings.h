/* The one table of ADAG_* settings: each read from the environment once
 * (first use), with a default and a description. `adag-info -c` lists them. */
#ifndef ADAG_COMMON_SETTINGS_H
#define ADAG_COMMON_SETTINGS_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    const char *worker_path;     /* ADAG_WORKER_PATH */
    const char *cudart_path;     /* ADAG_CUDART_PATH */
    const char *nccl_path;       /* ADAG_NCCL_PATH */
    int64_t spin_ns;             /* ADAG_SPIN_NS */
    int64_t spin_ns_crowded;     /* ADAG_SPIN_NS_CROWDED */
    int64_t max_inflight;        /* ADAG_MAX_INFLIGHT */
    int64_t slot_capacity;       /* ADAG_SLOT_CAPACITY */
    int64_t execute_timeout_ms;  /* ADAG_EXECUTE_TIMEOUT_MS */
    int64_t teardown_timeout_ms; /* ADAG_TEARDOWN_TIMEOUT_MS */
    int64_t control_timeout_ms;  /* ADAG_CONTROL_TIMEOUT_MS */
    int64_t comm_timeout_ms;     /* ADAG_COMM_TIMEOUT_MS */
    int64_t log_level;           /* ADAG_LOG_LEVEL */
    int64_t host_devices;        /* ADAG_HOST_DEVICES */
    int64_t host_copy_mbps;      /* ADAG_HOST_COPY_MBPS */
    const char *token_file;      /* ADAG_TOKEN_FILE */
    const char *token;           /* ADAG_TOKEN */
    const char *hosts;           /* ADAG_HOSTS */
    int64_t remote_timeout_ms;   /* ADAG_REMOTE_TIMEOUT_MS */
    int64_t agent_auth_timeout_ms; /* ADAG_AGENT_AUTH_TIMEOUT_MS */
    const char *data_cache_dir;  /* ADAG_DATA_CACHE_DIR */
    int64_t data_cache_bytes;    /* ADAG_DATA_CACHE_BYTES */
    int64_t data_fetches;        /* ADAG_DATA_FETCHES */
    int64_t data_http_retries;   /* ADAG_DATA_HTTP_RETRIES */
    int64_t data_http_timeout_ms; /* ADAG_DATA_HTTP_TIMEOUT_MS */
    int64_t trace_spans;         /* ADAG_TRACE_SPANS */
    int64_t live;                /* ADAG_LIVE */
    int64_t stats_timeout_ms;    /* ADAG_STATS_TIMEOUT_MS */
    int64_t placement;           /* ADAG_PLACEMENT */
    const char *topo_xml;        /* ADAG_TOPO_XML */
    int64_t topo_xml_this_system; /* ADAG_TOPO_XML_THIS_SYSTEM */
} adag_settings_t;

/* The settings in force (read once, thread-safe). */
const adag_settings_t *adag_settings(void);

/* Prints every setting: name, value in force, default, description. */
void adag_settings_print(FILE *out);

#endif
