/*
 * The execution loop of one actor in one compiled DAG. For execution
 * seq = 0, 1, 2, ... it runs the actor's schedule: for each operation,
 * READ (wait for the args' slots), acquire the return slots, COMPUTE (call
 * the method under the actor's call lock, so methods of one actor never run
 * concurrently even across DAGs), WRITE (publish the returns); then it
 * releases every slot it read. A failed input skips the method and passes
 * the failure on. The loop ends when the DAG's abort word is set.
 */
#ifndef ADAG_DAG_LOOP_H
#define ADAG_DAG_LOOP_H

#include "dag/program.h"
#include "transport/channel.h"

#include <adag.h>
#include <pthread.h>

typedef struct {
    char name[ADAG_MAX_NAME];
    adag_method_fn fn; /* NULL on the driver side of a process actor */
    unsigned nargs, nreturns;
} adag_method_info_t;

typedef struct adag_loop adag_loop_t;

/* Called (from the loop thread) when the loop meets a failure it cannot pass
 * on in a slot; the loop then stops. */
typedef void (*adag_loop_fatal_fn)(void *ctx, adag_status_t status, const char *msg);

struct adag_loop {
    adag_program_t prog;
    adag_segment_hdr_t *hdr;
    adag_chan_t *chans;       /* one endpoint per prog.chans entry */
    uint32_t *reads;          /* channels this actor reads (released per execution) */
    unsigned nreads;
    int waits_start;          /* some method takes no argument: wait for execute */
    adag_spin_t start_spin;   /* wait policy of that wait */
    void *state;
    pthread_mutex_t *call_lock;
    const adag_method_info_t *methods;
    unsigned nmethods;
    const char *actor_name;
    int notify_fd;            /* the DAG's eventfd, or -1 */
    adag_loop_fatal_fn on_fatal;
    void *fatal_ctx;
    pthread_t thread;
    int started;
};

/* Opens the loop's channel endpoints on a mapped segment. Takes ownership of
 * *prog's arrays (also on failure). */
adag_status_t adag_loop_open(adag_loop_t *loop, adag_program_t *prog, void *segment,
                             void *state, pthread_mutex_t *call_lock,
                             const adag_method_info_t *methods, unsigned nmethods,
                             const char *actor_name, int notify_fd);
adag_status_t adag_loop_start(adag_loop_t *loop);
/* Waits for the loop thread to end (after the abort word was set). */
void adag_loop_join(adag_loop_t *loop);
void adag_loop_close(adag_loop_t *loop);

#endif
