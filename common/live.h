/* The live view: a unix-socket server inside a driver process that hands a
 * text view (the DAG stats) to whoever attaches (`adag-info attach`), and
 * the client side of it. Library internal (no ADAG_API; adag.map exports
 * none of it).
 *
 * Wire protocol (text, every length bounded before use):
 *   request  "stats\n"                           at most ADAG_LIVE_REQUEST_MAX bytes,
 *                                                newline included
 *   reply    "ADAG-LIVE 1 OK <len>\n"  + len bytes of the view
 *            "ADAG-LIVE 1 ERR <len>\n" + len bytes of a message
 *   <len> is decimal, at most ADAG_LIVE_REPLY_MAX. The connection stays open
 *   for more requests; the server closes it after an ERR reply for a bad
 *   request (too long, unknown), a refused peer or too many clients, and on
 *   EOF or any error. An ERR reply for a failed render keeps it open.
 *
 * Security: the socket lives in a directory only this euid can enter
 * (adag__live_dir), is made 0600 before it listens, and every peer's
 * SO_PEERCRED uid must be this process's euid. */
#ifndef ADAG_COMMON_LIVE_H
#define ADAG_COMMON_LIVE_H

#include <adag.h>
#include <stddef.h>
#include <stdio.h>

#define ADAG_LIVE_REQUEST_MAX 64               /* bytes of one request line, '\n' included */
#define ADAG_LIVE_REPLY_MAX (4u * 1024 * 1024) /* bytes of one reply's text */
#define ADAG_LIVE_HEAD_MAX 32                  /* bytes of a reply header (24 at most are used) */
#define ADAG_LIVE_MAX_CLIENTS 8                /* clients served at once; more get ERR */
#define ADAG_LIVE_SEND_TIMEOUT_MS 1000         /* a client that reads no reply in this is dropped */

/* One open live view: the listening socket, its listener thread and its
 * clients. Opaque; made by adag__live_open, freed by adag__live_close. */
typedef struct adag_live adag_live_t;

/* Writes the current view as text into out (an open_memstream the server
 * owns: do not keep it or close it). Runs on the listener thread, one call
 * at a time per live view, so it must take whatever locks the data it reads
 * needs and must not call adag__live_close on its own view. Returns 0, or -1
 * on failure (the client then gets an ERR reply and stays connected). */
typedef int (*adag_live_render_fn)(void *arg, FILE *out);

/* The directory live sockets go in, written into buf (len bytes):
 * $XDG_RUNTIME_DIR/adag if XDG_RUNTIME_DIR is set and absolute, else
 * /tmp/adag-<euid>. Created 0700 if missing. Refused with ADAG_ERR_INVALID
 * (message naming the path and why) if it exists but is not a directory
 * (a symlink is not followed), is not owned by this euid, or is accessible
 * to group or others; ADAG_ERR_IO if it cannot be created or examined;
 * ADAG_ERR_INVALID if it does not fit buf. Thread-safe. */
adag_status_t adag__live_dir(char *buf, size_t len);

/* Opens a live view: a unix stream socket, mode 0600, and a listener thread
 * (started with every signal blocked) that answers requests with render(arg).
 * path NULL: <adag__live_dir()>/<pid>.sock, or <pid>-2.sock, <pid>-3.sock ...
 * when this process already has that one open; else exactly path (at most
 * 107 bytes). A socket file at the path that nobody listens on (a dead
 * process's) is replaced; one somebody listens on is ADAG_ERR_BUSY; a file
 * there that is no socket is ADAG_ERR_INVALID (it is never removed). render
 * and arg must stay valid until adag__live_close. On success *out is the
 * view; on failure it is untouched and the message names the path.
 * Thread-safe. */
adag_status_t adag__live_open(const char *path, adag_live_render_fn render, void *arg,
                             adag_live_t **out);

/* The socket's path; valid until adag__live_close. */
const char *adag__live_path(const adag_live_t *l);

/* Stops the listener (wakes it through an eventfd and joins it), closes
 * every client and the socket, unlinks the socket file (if it is still this
 * view's) and frees l. NULL is fine. Not from inside l's render callback. */
void adag__live_close(adag_live_t *l);

/* Client side (adag-info attach, tests). Connects to the live view at path:
 * *fd is a non-blocking, close-on-exec socket the caller closes. A connect
 * never waits: no socket there, nobody listening or a full backlog is
 * ADAG_ERR_IO naming the path. */
adag_status_t adag__live_connect(const char *path, int *fd);

/* Sends one "stats" request on fd (from adag__live_connect) and writes the
 * reply's text into out. timeout_ms (negative: none) bounds the whole
 * exchange. Errors name the driver's socket path: ADAG_ERR_CLOSED if the
 * driver closed the connection (or died) before the reply began;
 * ADAG_ERR_PROTOCOL for a malformed, oversized or truncated reply, or an ERR
 * reply (its message quoted, control characters replaced by '?');
 * ADAG_ERR_TIMEOUT; ADAG_ERR_IO for a failed call or write to out;
 * ADAG_ERR_NO_MEMORY. After an error other than an ERR reply for a failed
 * render the connection is of no further use. */
adag_status_t adag__live_request(int fd, FILE *out, int timeout_ms);

#endif
