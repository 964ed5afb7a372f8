/* Text output of the library's writing functions (adag_dag_write_dot,
 * adag_dag_write_trace, adag_stats_print, adag_data_print_stats, ...) and
 * of their buffer forms: printf into a caller's writer (adag_writer_t),
 * staged so that the writer gets a few large pieces, or into a caller's
 * buffer, counting what did not fit. The first failure sticks: later
 * output is dropped and the writer is not called again; adag__out_end says
 * how it went, once. No state and nothing internal: it reports through
 * the public adag_fail (common/error.h), so libadag-data compiles its own
 * copy (data/source_print.c writes with it). adag_write_fd, a writer of
 * libadag's API, is in common/fd.c. */
#ifndef ADAG_COMMON_OUT_H
#define ADAG_COMMON_OUT_H

#include "common/error.h"

#include <adag.h>
#include <stddef.h>
#include <stdint.h>

#define ADAG_OUT_STAGE 8192

typedef struct {
    int to_writer; /* 1: to w; 0: into the caller's buffer */
    adag_writer_t w;
    char *buf;                /* buffer mode: the caller's (NUL-terminated); else the stage */
    size_t cap, len;          /* buf's size and the bytes in it */
    uint64_t total;           /* bytes produced so far (delivered, staged or cut off) */
    uint64_t delivered;       /* bytes the writer accepted */
    adag_status_t st;         /* the first failure (a writer's error, no memory) */
    char why[ADAG_ERROR_MAX]; /* its message */
    char stage[ADAG_OUT_STAGE];
} adag_out_t;

/* To writer w (a NULL fn fails at adag__out_end: ADAG_ERR_INVALID). */
void adag__out_writer(adag_out_t *o, adag_writer_t w);
/* Into buf[0..len) (buf may be NULL when len is 0), kept NUL-terminated. */
void adag__out_buffer(adag_out_t *o, char *buf, size_t len);

void adag__out_printf(adag_out_t *o, const char *fmt, ...) ADAG_PRINTF(2, 3);
void adag__out_write(adag_out_t *o, const void *data, size_t n);
void adag__out_putc(adag_out_t *o, char c);

/* Hands the staged bytes to the writer. */
void adag__out_flush(adag_out_t *o);

/* Flushes and reports, naming function fn:
 *   writer mode: ADAG_OK, or the writer's status (ADAG_ERR_IO for a value
 *   that is no ADAG_ERR_* code) with "<fn>: the writer failed after N
 *   bytes: <its message>";
 *   buffer mode: *needed (may be NULL) = the text's bytes + 1 (its NUL);
 *   ADAG_OK if it fit, else ADAG_ERR_TOO_LARGE naming both sizes (buf
 *   then holds what fit, NUL-terminated when len > 0). */
adag_status_t adag__out_end(adag_out_t *o, const char *fn, size_t *needed);

/* What a writing function writes: obj's text into o; a status of its own
 * when it cannot (what it reads failed), else ADAG_OK. */
typedef adag_status_t (*adag_out_body_fn)(void *obj, adag_out_t *o);

/* The two forms of a text writer, named fn: body(obj) to writer w, or
 * into buf[0..len) (adag__out_end says how it went); ADAG_ERR_INVALID
 * "<fn>: <what> and out.fn must not be NULL" ("<what> must not be NULL,
 * nor buf with len <len>") for bad arguments. */
adag_status_t adag__out_run(const char *fn, const char *what, void *obj, adag_writer_t w,
                           adag_out_body_fn body);
adag_status_t adag__out_run_buffer(const char *fn, const char *what, void *obj, char *buf,
                                  size_t len, size_t *needed, adag_out_body_fn body);

#endif
