/*
 * Configuration: the settings of a runtime or a DAG, read from the
 * environment and modified by name.
 *
 * A part of <adag.h>, which programs and modules include (it includes
 * every part, in order; this one includes the parts it builds on).
 */
#ifndef ADAG_CONFIG_H
#define ADAG_CONFIG_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Configuration                                                       */
/* ------------------------------------------------------------------ */

/* Values of the ADAG_* settings (`adag-info -c` lists every one with its
 * default and what it does), the way UCX's ucp_config_t holds its UCX_*
 * ones: read from the environment, changed by name, given to
 * adag_runtime_create (adag_runtime_params_t.config), which copies them.
 * Every setting is per runtime: its DAGs, channels and actors use its
 * values, and its process and remote actors receive them (their workers
 * use those, whatever their own environment says), so two runtimes of one
 * process may differ. The exceptions are process-wide, read by each
 * process from its own environment once: the device libraries loaded once
 * (ADAG_CUDART_PATH, ADAG_NCCL_PATH), ADAG_LOG_LEVEL, the emulated
 * backend's device count ADAG_EMU_DEVICES, the topology (ADAG_TOPO_XML,
 * ADAG_TOPO_XML_THIS_SYSTEM) and the agent's ADAG_AGENT_AUTH_TIMEOUT_MS; a
 * config shows them and refuses to change them. One config may be read by
 * several threads at once, but not while one modifies it. */
typedef struct adag_config *adag_config_h;

/* A new config with the environment's values now: a setting not set, or
 * set to "", has its default; a value the setting refuses is warned about
 * (ADAG_LOG_LEVEL >= 2) and the default kept, as for a runtime created
 * without a config. Release it with adag_config_release. */
ADAG_API adag_status_t adag_config_read(adag_config_h *config);

/* Sets setting `name` (e.g. "ADAG_EXECUTE_TIMEOUT_MS") to `value`, the
 * text its environment variable would hold ("250"; "" restores the
 * default), checked as the environment's is. Refused, the config left as
 * it was: ADAG_ERR_NOT_FOUND for a name that is no setting;
 * ADAG_ERR_INVALID for a value the setting does not take
 * ("adag_config_modify: ADAG_SPIN_NS=-1: not an integer in [0,
 * 1000000000]"), for a process-wide setting, and for a NULL argument. */
ADAG_API adag_status_t adag_config_modify(adag_config_h config, const char *name,
                                          const char *value);

/* Writes every setting as `adag-info -c` prints it, two lines each:
 * "NAME = value (default D)" (a process-wide one adds "; process-wide" and
 * shows this process's value; ADAG_TOKEN shows only whether it is set),
 * then what it does. *needed (when not NULL) gets the size of the whole
 * text with its NUL. The text is NUL-terminated within buf's len bytes;
 * when it does not fit, buf holds as much as fits and the call returns
 * ADAG_ERR_TOO_LARGE (buf may be NULL with len 0, to learn the size). */
ADAG_API adag_status_t adag_config_print(adag_config_h config, char *buf, size_t len,
                                         size_t *needed);

/* The value of setting `name` as text, as its environment variable would
 * hold it ("250"; "" for a string setting that is unset), NUL-terminated in
 * buf: what a component takes its settings from (e.g. the config of the DAG
 * it feeds, adag_dag_config). A process-wide setting gives this process's
 * value. *needed (when not NULL) gets the value's size with its NUL; when
 * it does not fit, buf holds as much as fits and the call returns
 * ADAG_ERR_TOO_LARGE (buf may be NULL with len 0, to learn the size).
 * ADAG_ERR_NOT_FOUND for a name that is no setting; ADAG_ERR_INVALID for
 * the secret ADAG_TOKEN (never read back) and for a NULL config or name. */
ADAG_API adag_status_t adag_config_get(adag_config_h config, const char *name, char *buf,
                                       size_t len, size_t *needed);

/* Frees the config; runtimes created with it keep their own copy. */
ADAG_API adag_status_t adag_config_release(adag_config_h config);

#ifdef __cplusplus
}
#endif
#endif /* ADAG_CONFIG_H */
