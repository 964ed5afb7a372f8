/*
 * Remote shards (http:// and https:// URLs) for the data source: fetched
 * with libcurl (data/fetch.c) into a local disk cache (data/cache.c) that
 * several processes share.
 *
 * The cache is a directory (0700) of entries, each a data file (0600) and
 * a sidecar "<data>.sum" with its URL, size and XXH3-64 checksum. A fetch
 * writes a temporary file, checks the transfer was whole (libcurl's length
 * check, HTTP status) while hashing it, then renames the sidecar and the
 * data into place; an entry is used only if its data matches its sidecar,
 * so a crash at any point leaves nothing half written that is ever used (a
 * corrupt or half-renamed entry is fetched again). Each entry has a lock
 * file "<data>.lock": flock shared while a source uses the entry (it is
 * never evicted then), exclusive while one process fetches it (the others
 * wait and then use what it fetched). The cache keeps its entries under a
 * byte cap, evicting the least recently used (the sidecar's mtime, touched
 * at each use) that no one uses; entries in use are never evicted, so what
 * open sources hold may exceed the cap.
 */
#ifndef ADAG_DATA_CACHE_H
#define ADAG_DATA_CACHE_H

#include <adag.h>

#include <stddef.h>
#include <stdint.h>

/* ---- fetching (data/fetch.c) ---- */

typedef struct {
    int retries;           /* after the first try */
    int64_t timeout_ms;    /* connecting; a try receiving nothing for this long */
    uint64_t max_bytes;    /* a larger body is refused */
} adag_data_fetch_opts_t;

/* Downloads url into fd (truncated first, and again before each retry),
 * returning its size and XXH3-64 checksum. Transient failures (no
 * connection, a cut transfer, a timeout, HTTP 408/429/5xx) are retried
 * with exponential backoff; the last one is reported with the URL. */
adag_status_t adag__data_fetch(const char *url, int fd, const adag_data_fetch_opts_t *opts,
                              uint64_t *size, uint64_t *hash);

/* The XXH3-64 checksum of a file's first len bytes (mapped). */
adag_status_t adag__data_file_hash(int fd, uint64_t len, uint64_t *hash);

/* Whether a shard name is a URL the cache fetches. */
int adag__data_is_url(const char *s);

/* ---- the cache (data/cache.c) ---- */

typedef struct adag_data_cache adag_data_cache_t;

typedef struct {
    uint64_t hits, misses;   /* entries used as found / fetched */
    uint64_t bytes_fetched;
    uint64_t evicted;        /* entries this process evicted */
} adag_data_cache_stats_t;

/* Opens (creating it 0700) the cache directory; cap_bytes bounds it. */
adag_status_t adag__data_cache_open(const char *dir, uint64_t cap_bytes,
                                   const adag_data_fetch_opts_t *fetch, adag_data_cache_t **out);

/* Makes url + suffix an entry (fetching it if absent or corrupt) and holds
 * it until the cache is closed; *stem gets its local path without the
 * suffix (malloc'd). Safe from several threads at once. */
adag_status_t adag__data_cache_get(adag_data_cache_t *c, const char *url, const char *suffix,
                                  char **stem);

void adag__data_cache_stats(adag_data_cache_t *c, adag_data_cache_stats_t *out);

/* Releases every entry held and frees the cache (NULL: nothing). */
void adag__data_cache_close(adag_data_cache_t *c);

#endif
