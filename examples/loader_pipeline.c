/*
 * loader_pipeline: the data front stage feeding a 2-stage pipeline.
 *
 *     JPEG shards --source threads: decode, random-resized crop, flip,
 *     normalize--> [input slot] --> stage0.forward --> stage1.checksum --> driver
 *
 * The source (include/adag/data.h) reads WebDataset shards of JPEGs (given
 * with --shards, or written by the example into a temporary directory: 4
 * shards x 200 images of 256 x 256), and its threads write each batch of
 * 32 f32 CHW images straight into the input slot of an execution of the
 * compiled DAG (ADAG_DATA_PARAM_DAG): no batch is copied by the driver.
 * Stage 0 (an adag-worker process running class "stage" of
 * examples/modules/stages.c) transforms the batch, stage 1 sums it; the
 * driver takes each execution's sum in batch order. A progress bar runs on
 * stderr when it is a terminal; the source's stats are printed at the end.
 *
 * Usage: loader_pipeline [--shards GLOB] [--epochs N] [--threads N]
 *                        [--inflight K] [--size PIXELS] [--dot FILE]
 */
#define EXAMPLE_NAME "loader_pipeline"
#include "example_util.h"
#include "jpeg_shards.h"
#include "modules/stages.h"

#include <adag/data.h>


#define BATCH 32

typedef struct {
    const char *shards, *dot;
    unsigned long epochs, threads, inflight, size;
} opts_t;

static bool parse(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.epochs = 2, .threads = 2, .inflight = 4, .size = 160};
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *arg = i + 1 < argc ? argv[i + 1] : NULL;
        bool good = true;
        if (!strcmp(opt, "--shards") && arg)
            o->shards = arg;
        else if (!strcmp(opt, "--dot") && arg)
            o->dot = arg;
        else if (!strcmp(opt, "--epochs"))
            good = parse_count(opt, arg, 1, 1000, &o->epochs);
        else if (!strcmp(opt, "--threads"))
            good = parse_count(opt, arg, 1, 64, &o->threads);
        else if (!strcmp(opt, "--inflight"))
            good = parse_count(opt, arg, 1, 64, &o->inflight);
        else if (!strcmp(opt, "--size"))
            good = parse_count(opt, arg, 16, 1024, &o->size);
        else {
            fprintf(stderr,
                    "usage: loader_pipeline [--shards GLOB] [--epochs N] [--threads N] "
                    "[--inflight K] [--size PIXELS] [--dot FILE]\n");
            return false;
        }
        if (!good)
            return false;
        i++;
    }
    return true;
}

/* stage0.forward -> stage1.checksum, process actors of examples/libstages.so */
static bool build(adag_runtime_h rt, const opts_t *o, size_t batch_bytes, adag_dag_h *dag)
{
    adag_actor_h actors[2];
    const char *methods[2] = {"forward", "checksum"};
    for (int i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "stage%d", i);
        stage_init_t init = {.index = i, .scale = 0.5f};
        adag_actor_params_t ap = {
            .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME |
                          ADAG_ACTOR_PARAM_PLACEMENT | ADAG_ACTOR_PARAM_INIT |
                          ADAG_ACTOR_PARAM_MODULE,
            .class_name = "stage",
            .name = name,
            .placement = ADAG_PLACEMENT_PROCESS,
            .init_data = &init,
            .init_size = sizeof init,
            .module_path = ADAG_EXAMPLE_DIR "/libstages.so",
        };
        if (!ok(adag_actor_create(rt, &ap, &actors[i]), "adag_actor_create"))
            return false;
    }
    adag_graph_h g;
    adag_node_h node;
    if (!ok(adag_graph_create(rt, &g), "adag_graph_create"))
        return false;
    bool good = ok(adag_graph_input(g, 0, &node), "adag_graph_input");
    for (int i = 0; i < 2 && good; i++)
        good = ok(adag_graph_bind(g, actors[i], methods[i], &node, 1, &node), "adag_graph_bind");
    good = good && ok(adag_graph_output(g, &node, 1), "adag_graph_output");
    adag_compile_params_t cp = {
        .field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT | ADAG_COMPILE_PARAM_SLOT_CAPACITY |
                      ADAG_COMPILE_PARAM_NAME,
        .max_inflight = (unsigned)o->inflight,
        .slot_capacity = batch_bytes,
        .name = "loader",
    };
    good = good && ok(adag_graph_compile(g, &cp, dag), "adag_graph_compile");
    adag_graph_destroy(g);
    return good;
}

int main(int argc, char **argv)
{
    opts_t o;
    if (!parse(argc, argv, &o))
        return 2;
    char tmp[] = "/tmp/adag-loader-XXXXXX", glob[64];
    bool made = false;
    int rc = 1;
    adag_runtime_h rt = NULL;
    adag_dag_h dag = NULL;
    adag_data_source_h src = NULL;
    if (!o.shards) {
        if (!mkdtemp(tmp)) {
            perror("loader_pipeline: mkdtemp");
            return 1;
        }
        made = true;
        printf("loader_pipeline: writing 4 WebDataset shards x 200 JPEGs (256x256) in %s\n",
               tmp);
        if (jpeg_shards_write(tmp, 4, 200, 256, 1) != 0)
            goto out;
        snprintf(glob, sizeof glob, "%s/shard-*.tar", tmp);
        o.shards = glob;
    }

    adag_data_image_t img = {.height = (unsigned)o.size, .width = (unsigned)o.size};
    size_t sample = adag_data_image_size(&img);
    if (!ok(adag_runtime_create(NULL, &rt), "adag_runtime_create") ||
        !build(rt, &o, sample * BATCH, &dag))
        goto out;
    if (o.dot && !write_dot_file(dag, o.dot))
        goto out;

    const char *shards[] = {o.shards};
    const char *fields[] = {"jpg"};
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_FIELDS | ADAG_DATA_PARAM_MAP | ADAG_DATA_PARAM_SCRATCH |
                      ADAG_DATA_PARAM_THREADS | ADAG_DATA_PARAM_SHUFFLE |
                      ADAG_DATA_PARAM_SEED | ADAG_DATA_PARAM_DAG,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_WEBDATASET,
        .batch_size = BATCH,
        .sample_size = sample,
        .fields = fields,
        .nfields = 1,
        .map = adag_data_image_map,
        .map_arg = &img,
        .scratch_size = adag_data_image_scratch(&img),
        .threads = (unsigned)o.threads,
        .shuffle_shards = 1,
        .shuffle_window = 256,
        .seed = 42,
        .dag = dag,
    };
    if (!ok(adag_data_open(&p, &src), "adag_data_open"))
        goto out;
    uint64_t per_epoch;
    adag_data_size(src, &per_epoch, NULL);
    printf("loader_pipeline: %llu batches of %d %lux%lu f32 images an epoch (%.1f MB each), "
           "%lu epochs, %lu executions in flight\n",
           (unsigned long long)per_epoch, BATCH, o.size, o.size, sample * BATCH / 1e6, o.epochs,
           o.inflight);

    double t0 = now_s(), total = 0;
    for (uint64_t b = 0; b < per_epoch * o.epochs; b++) {
        adag_ref_t ref;
        adag_data_batch_t batch;
        adag_value_t out;
        if (!ok(adag_data_next_exec(src, &ref, &batch, 60000), "adag_data_next_exec") ||
            !ok(adag_dag_get(dag, ref, &out, 1, 60000), "adag_dag_get"))
            goto out;
        double sum = 0;
        if (out.size == sizeof sum)
            memcpy(&sum, out.data, sizeof sum);
        total += sum;
        if (!ok(adag_dag_release(dag, ref), "adag_dag_release"))
            goto out;
        adag_data_progress(src, adag_writer_fd(STDERR_FILENO));
    }
    fflush(stdout); /* what printf holds goes first; the stats end the progress bar's line */
    adag_data_print_stats(src, adag_writer_fd(STDOUT_FILENO));
    double dt = now_s() - t0;
    adag_data_close(src);
    src = NULL;
    printf("loader_pipeline: %llu batches through the DAG in %.2f s: %.0f images/s "
           "(checksum of every output %.6g)\n",
           (unsigned long long)(per_epoch * o.epochs), dt, per_epoch * o.epochs * BATCH / dt,
           total);
    rc = 0;
out:
    adag_data_close(src);
    if (dag)
        adag_dag_destroy(dag);
    if (rt)
        adag_runtime_destroy(rt);
    if (made)
        jpeg_shards_remove(tmp);
    return rc;
}
