/*
 * adag's core: the library's version, the ABI version and the export
 * macros, status codes and the last error, and writers (where text and
 * traces go).
 *
 * A part of <adag.h>, which programs and modules include (it includes
 * every part, in order; this one includes the parts it builds on).
 */
#ifndef ADAG_CORE_H
#define ADAG_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ADAG_VERSION_MAJOR 0
#define ADAG_VERSION_MINOR 3

/* ABI
 *
 * ADAG_ABI_VERSION numbers the binary layout of what a module and the
 * library share: adag_class_def_t, adag_method_def_t, adag_value_t and the
 * meaning of the adag_call_* functions. It changes whenever one of them
 * changes incompatibly, and only then. A class definition carries it
 * (.abi_version = ADAG_ABI_VERSION, its first field) and a module records it
 * (ADAG_MODULE exports adag_module_abi_version): adag_class_register and
 * adag-worker accept exactly the library's own ADAG_ABI_VERSION and refuse
 * anything else with ADAG_ERR_INVALID naming both versions (a later library
 * may accept older versions it still knows how to read). Rebuild modules and
 * classes against the new header when it changes.
 *
 * Fields are added without a new ABI version where the struct leaves room:
 *   - params structs: a new field_mask bit (unset bits mean defaults);
 *   - adag_dag_stats_t: the caller's struct_size says how much it has room for;
 *   - adag_class_def_t and adag_value_t: reserved words, which must be zero
 *     today (a nonzero one is ADAG_ERR_INVALID), so a later field whose zero
 *     means "as before" can take their place;
 *   - adag_input_view_t (filled by the library, in arrays): reserved words
 *     it sets to zero, so a later field takes their place and an array's
 *     stride stays;
 *   - adag_method_def_t has no room of its own: it is read only through its
 *     class, so its layout is covered by the class's abi_version, and method
 *     tables keep their positional {name, fn, nargs, nreturns} initializers.
 * libadag.so exports exactly the ADAG_API functions declared in adag.h and
 * its parts (adag.map). */
#define ADAG_ABI_VERSION 2u

#if defined(__GNUC__)
#define ADAG_API __attribute__((visibility("default")))
#define ADAG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define ADAG_API
#define ADAG_PRINTF(f, a)
#endif

/* ------------------------------------------------------------------ */
/* Status codes                                                        */
/* ------------------------------------------------------------------ */

typedef enum {
    ADAG_OK = 0,
    ADAG_ERR_INVALID = -1,     /* bad argument or graph; message names it */
    ADAG_ERR_NO_MEMORY = -2,   /* allocation or mapping failed */
    ADAG_ERR_TIMEOUT = -3,     /* the wait ran out; the operation may be retried */
    ADAG_ERR_AGAIN = -4,       /* non-blocking call would block */
    ADAG_ERR_METHOD = -5,      /* a method failed: "actor <name>.<method>: <message>" */
    ADAG_ERR_ACTOR_DIED = -6,  /* an actor process died; the message names it */
    ADAG_ERR_TOO_LARGE = -7,   /* a value does not fit its channel slot */
    ADAG_ERR_IO = -8,          /* a system call failed (message has errno text) */
    ADAG_ERR_CLOSED = -9,      /* the DAG was destroyed or is being destroyed */
    ADAG_ERR_NOT_FOUND = -10,  /* no such class, module, method or setting */
    ADAG_ERR_BUSY = -11,       /* the object is in use (e.g. a DAG still uses it) */
    ADAG_ERR_PROTOCOL = -12,   /* a peer sent a malformed or unexpected message */
    ADAG_ERR_INTERNAL = -13,   /* a broken invariant of the runtime (a bug, or its shared
                                  memory overwritten); the DAG is failed */
} adag_status_t;

/* Short static name of a status, e.g. "ADAG_ERR_TIMEOUT: timed out". */
ADAG_API const char *adag_status_str(adag_status_t status);

/* Detailed message of the last failure reported to this thread (never
 * NULL; empty if none). Valid until the next adag call on this thread. */
ADAG_API const char *adag_last_error(void);

/* Records the message (printf's format) as this thread's last error, what
 * adag_last_error() gives next, and returns status, so that code built on
 * adag reports a failure the way adag's own functions do: a writer's fn
 * (see below), a data map (include/adag/data.h), a library layered on this
 * one (libadag-data reports through it). `return adag_fail(ADAG_ERR_IO,
 * "cannot open %s", path);`. The arguments may quote adag_last_error()
 * (adding context to the message there); an empty message ("%s", "")
 * clears it. A NULL fmt records "(no message)". */
ADAG_API adag_status_t adag_fail(adag_status_t status, const char *fmt, ...) ADAG_PRINTF(2, 3);

/* ------------------------------------------------------------------ */
/* Writers: where text and traces go                                   */
/* ------------------------------------------------------------------ */

/* The functions that write text or a trace (adag_dag_write_dot,
 * adag_dag_write_trace, adag_stats_print, adag_data_print_stats,
 * adag_data_progress) take a writer: a function and its context. They
 * call fn on the calling thread, before they return, with the next n > 0
 * bytes each time, in order (staged: a few kilobytes a call, not a call
 * per line). fn returns ADAG_OK, or an error that ends the write: fn is
 * not called again, what the function allocated is freed, and it returns
 * fn's status (ADAG_ERR_IO for a value that is no ADAG_ERR_* code) with
 * "<function>: writing failed after <n> bytes: <why>", where why is the
 * message fn left in adag_last_error() (adag_write_fd's), else what it
 * returned. Nothing is written past a failure, so a reader may see a
 * prefix of the text. */
typedef adag_status_t (*adag_write_fn)(void *ctx, const void *buf, size_t n);

typedef struct {
    adag_write_fn fn;
    void *ctx;
} adag_writer_t;

/* An adag_write_fn for the file descriptor (int)(intptr_t)ctx: writes all
 * n bytes, going on after a short write and after EINTR, and waiting (poll)
 * whenever a non-blocking fd says EAGAIN, as long as a blocking fd would
 * have blocked. A pipe or socket without a reader is ADAG_ERR_IO (EPIPE)
 * with no SIGPIPE delivered; any other failure is ADAG_ERR_IO with the
 * errno text ("write to fd 5 (...): No space left on device"). The fd is
 * the caller's: never closed. */
ADAG_API adag_status_t adag_write_fd(void *ctx, const void *buf, size_t n);

/* The writer to file descriptor fd: adag_dag_write_dot(dag, adag_writer_fd(1)). */
static inline adag_writer_t adag_writer_fd(int fd)
{
    adag_writer_t w = {adag_write_fd, (void *)(intptr_t)fd};
    return w;
}

/* The text writers also fill a caller's buffer (adag_dag_format_dot,
 * adag_stats_format, adag_data_format_stats, adag_data_format_progress):
 * buf[0..len) gets the text, NUL-terminated, and *needed (may be NULL)
 * the bytes it takes, its NUL included. A text that does not fit is cut:
 * buf holds its first len - 1 bytes and a NUL (nothing when len is 0; buf
 * may then be NULL), and the call returns ADAG_ERR_TOO_LARGE with both
 * sizes in the message, *needed telling what to allocate (a DAG's DOT and
 * a stats snapshot give the same text again; a data source's figures move
 * on, so leave room). */

#ifdef __cplusplus
}
#endif
#endif /* ADAG_CORE_H */
