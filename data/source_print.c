/*
 * Showing a data source (include/adag/data.h): its stats printed as
 * adag-info prints, and a progress bar on a terminal.
 */
#include "data/source.h"

#include "common/clock.h"
#include "common/out.h"

#include <stdio.h>
#include <unistd.h>

/* Redraws at most this often. */
#define PROGRESS_EVERY_NS 100000000LL
#define BAR_WIDTH 24

static double mb(double bytes)
{
    return bytes / 1e6;
}

/* "768 B", "3.1 kB", "25.2 MB", "1.50 GB" (small budgets read as what they are). */
static const char *amount(char *buf, size_t len, double bytes)
{
    if (bytes >= 1e9)
        snprintf(buf, len, "%.2f GB", bytes / 1e9);
    else if (bytes >= 1e6)
        snprintf(buf, len, "%.1f MB", bytes / 1e6);
    else if (bytes >= 1e3)
        snprintf(buf, len, "%.1f kB", bytes / 1e3);
    else
        snprintf(buf, len, "%.0f B", bytes);
    return buf;
}

/* Feeding a DAG: the executions the source is filling or holding ready
 * (started, not handed out). */
static unsigned dag_busy(adag_data_source_t *src)
{
    unsigned busy = 0;
    pthread_mutex_lock(&src->lock);
    for (unsigned k = 0; src->slots && k < src->nslots; k++)
        busy += src->slots[k].state == SLOT_FILLING || src->slots[k].state == SLOT_READY;
    pthread_mutex_unlock(&src->lock);
    return busy;
}

/* The memory line(s). Feeding a DAG, the batches are in its input slots,
 * not in the source's budget (which then holds the threads' scratch); a
 * device input's batches are written in the DAG's pinned staging, the
 * DAG's memory too: all are shown. */
static void print_memory(adag_data_source_t *src, const adag_data_stats_t *st, adag_out_t *out)
{
    char held[32], budget[32], peak[32], a[32], b[32], c[32];
    amount(held, sizeof(held), (double)st->bytes_held);
    amount(budget, sizeof(budget), (double)st->budget);
    amount(peak, sizeof(peak), (double)st->bytes_peak);
    if (!src->p.dag) {
        adag__out_printf(out, "  memory      %s held of a %s budget (peak %s)\n", held, budget,
                        peak);
        return;
    }
    unsigned busy = dag_busy(src);
    const char *name = adag_dag_name(src->p.dag);
    adag__out_printf(out,
                    "  memory      batches of %s in DAG %s's input slots of %s: %u of its %u "
                    "executions filling or ready here (%s)\n",
                    amount(a, sizeof(a), (double)src->batch_bytes), name,
                    amount(b, sizeof(b), (double)src->dag_input.capacity), busy, src->nslots,
                    amount(c, sizeof(c), (double)busy * (double)src->batch_bytes));
    if (src->dag_input.device != ADAG_DEVICE_HOST)
        adag__out_printf(out,
                        "              written in DAG %s's pinned staging (%u x %s, the DAG's "
                        "memory) and copied to device %d\n",
                        name, src->nslots, amount(c, sizeof(c), (double)src->dag_input.capacity),
                        (int)src->dag_input.device);
    adag__out_printf(out,
                    "              the source's own %s held of a %s budget (peak %s: the "
                    "threads' scratch)\n",
                    held, budget, peak);
}

static adag_status_t print_stats(void *arg, adag_out_t *out)
{
    adag_data_source_h src = arg;
    adag_data_stats_t st;
    adag_status_t rc = adag_data_stats(src, &st);
    if (rc != ADAG_OK)
        return rc;
    double t = st.elapsed_s > 0 ? st.elapsed_s : 1e-9;
    char cpus[ADAG_CPULIST_MAX] = "any CPU";
    if (src->bound_cpus)
        adag__cpulist_format(&src->cpus, cpus, sizeof(cpus));
    adag__out_printf(out,
                    "data source: %u shard%s (%s), %llu samples an epoch, %llu batches of "
                    "%u for rank %u of %u, %u threads on %s%s\n",
                    src->nshards, src->nshards == 1 ? "" : "s", src->fmt->name,
                    (unsigned long long)src->nsamples, (unsigned long long)src->batches_rank,
                    src->p.batch_size, src->p.rank, src->p.world, src->nthreads,
                    src->bound_cpus ? "CPUs " : "", cpus);
    adag__out_printf(out,
                    "  delivered   %llu batches, %llu samples decoded in %.1f s: %.0f "
                    "samples/s, %.1f MB/s read\n",
                    (unsigned long long)st.batches, (unsigned long long)st.samples, st.elapsed_s,
                    (double)st.samples / t, mb((double)st.bytes_read) / t);
    adag__out_printf(out,
                    "  waiting     consumer starved %.2f s; threads blocked %.2f s (on the "
                    "budget, the consumer or the DAG's window)\n",
                    st.starved_s, st.blocked_s);
    if (st.batches)
        adag__out_printf(out, "  per batch   consumer starved %.2f ms, threads blocked %.2f ms\n",
                        1e3 * st.starved_s / (double)st.batches,
                        1e3 * st.blocked_s / (double)st.batches);
    for (unsigned k = src->p.map ? 0 : 1; st.samples && (src->p.map || src->p.nsteps) &&
                                           k <= st.nsteps;
         k++)
        adag__out_printf(out, "  %-11s %.1f us a sample (%.2f s over the threads)\n",
                        k ? src->steps[k - 1].name : "map", 1e6 * st.step_s[k] / (double)st.samples,
                        st.step_s[k]);
    print_memory(src, &st, out);
    adag__out_printf(out, "  bad records %llu skipped\n", (unsigned long long)st.bad_skipped);
    if (src->cache)
        adag__out_printf(out, "  cache       %llu hits, %llu misses, %.1f MB fetched\n",
                        (unsigned long long)st.cache_hits, (unsigned long long)st.cache_misses,
                        mb((double)st.bytes_fetched));
    return ADAG_OK;
}

adag_status_t adag_data_print_stats(adag_data_source_h src, adag_writer_t out)
{
    if (src && out.fn)
        adag__data_progress_end(src); /* a progress bar's line ends first */
    return adag__out_run("adag_data_print_stats", "source", src, out, print_stats);
}

adag_status_t adag_data_format_stats(adag_data_source_h src, char *buf, size_t len, size_t *needed)
{
    return adag__out_run_buffer("adag_data_format_stats", "source", src, buf, len, needed,
                               print_stats);
}

/* The bar's line: "epoch 2 [####....] 7/30  ...  starved 0.1 s". */
static adag_status_t progress_line(void *arg, adag_out_t *out)
{
    adag_data_source_h src = arg;
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    uint64_t done = src->p.start_batch + st.batches, per = src->batches_rank;
    uint64_t epoch = src->p.start_epoch + done / per, in_epoch = done % per;
    if (in_epoch == 0 && done > 0) { /* an epoch just ended: show it full */
        epoch--;
        in_epoch = per;
    }
    unsigned fill = (unsigned)(in_epoch * BAR_WIDTH / per);
    char bar[BAR_WIDTH + 1];
    for (unsigned i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    double t = st.elapsed_s > 0 ? st.elapsed_s : 1e-9;
    char held[64];
    if (src->p.dag) /* the batches are in the DAG's slots */
        snprintf(held, sizeof(held), "filling %u/%u executions", dag_busy(src), src->nslots);
    else
        snprintf(held, sizeof(held), "held %.0f/%.0f MB", mb((double)st.bytes_held),
                 mb((double)st.budget));
    adag__out_printf(
        out, "epoch %llu [%s] %llu/%llu  %.0f samples/s  %.1f MB/s  %s  starved %.1f s",
        (unsigned long long)epoch, bar, (unsigned long long)in_epoch, (unsigned long long)per,
        (double)st.samples / t, mb((double)st.bytes_read) / t, held, st.starved_s);
    return ADAG_OK;
}

adag_status_t adag_data_progress(adag_data_source_h src, adag_writer_t out)
{
    if (!src || !out.fn)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_progress: source and out.fn must not be NULL");
    /* an fd that is no terminal (a log, a pipe) is left clean */
    if (out.fn == adag_write_fd && !isatty((int)(intptr_t)out.ctx))
        return ADAG_OK;
    int64_t now = adag__now_ns();
    if (now - src->progress_ns < PROGRESS_EVERY_NS)
        return ADAG_OK;
    src->progress_ns = now;
    if (src->progress_out.fn &&
        (src->progress_out.fn != out.fn || src->progress_out.ctx != out.ctx))
        adag__data_progress_end(src); /* another writer: the old one's line ends */
    adag_out_t o;
    adag__out_writer(&o, out);
    adag__out_printf(&o, "\r\033[K");
    progress_line(src, &o);
    adag_status_t st = adag__out_end(&o, "adag_data_progress", NULL);
    src->progress_out = st == ADAG_OK ? out : (adag_writer_t){NULL, NULL};
    return st;
}

adag_status_t adag_data_format_progress(adag_data_source_h src, char *buf, size_t len,
                                        size_t *needed)
{
    return adag__out_run_buffer("adag_data_format_progress", "source", src, buf, len, needed,
                               progress_line);
}
