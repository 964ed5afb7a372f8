/* The public configuration objects (include/adag.h, "Configuration"): a
 * runtime's settings (common/settings.h) held for a caller to change. */
#include "common/error.h"
#include "common/settings.h"

#include <stdlib.h>
#include <string.h>

adag_status_t adag_config_read(adag_config_h *config)
{
    if (!config)
        return adag__error(ADAG_ERR_INVALID, "adag_config_read: config is NULL");
    *config = NULL;
    adag_config_h c = calloc(1, sizeof(*c));
    if (!c)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_config_read: out of memory");
    adag_status_t st = adag__settings_from_env(&c->settings);
    if (st != ADAG_OK) {
        free(c);
        adag__error_prefix("adag_config_read");
        return st;
    }
    *config = c;
    return ADAG_OK;
}

adag_status_t adag_config_modify(adag_config_h config, const char *name, const char *value)
{
    if (!config || !name || !value)
        return adag__error(ADAG_ERR_INVALID, "adag_config_modify: %s is NULL",
                          !config ? "config" : !name ? "name" : "value");
    return adag__settings_set(&config->settings, name, value, "adag_config_modify");
}

adag_status_t adag_config_print(adag_config_h config, char *buf, size_t len, size_t *needed)
{
    if (needed)
        *needed = 0;
    if (!config || (!buf && len))
        return adag__error(ADAG_ERR_INVALID, "adag_config_print: %s",
                          !config ? "config is NULL" : "buf is NULL but len is not 0");
    size_t n = adag__settings_format(&config->settings, buf, len) + 1;
    if (needed)
        *needed = n;
    if (n > len)
        return adag__error(ADAG_ERR_TOO_LARGE,
                          "adag_config_print: the settings take %zu bytes, the buffer has %zu",
                          n, len);
    return ADAG_OK;
}

adag_status_t adag_config_get(adag_config_h config, const char *name, char *buf, size_t len,
                              size_t *needed)
{
    if (needed)
        *needed = 0;
    if (!config || !name || (!buf && len))
        return adag__error(ADAG_ERR_INVALID, "adag_config_get: %s",
                          !config ? "config is NULL"
                          : !name ? "name is NULL"
                                  : "buf is NULL but len is not 0");
    return adag__settings_get(&config->settings, name, buf, len, needed, "adag_config_get");
}

adag_status_t adag_config_release(adag_config_h config)
{
    if (!config)
        return adag__error(ADAG_ERR_INVALID, "adag_config_release: config is NULL");
    adag__settings_free(&config->settings);
    free(config);
    return ADAG_OK;
}
