# adag build. `make` builds the two libraries, the worker, tools, tests and examples:
#   libadag.so / libadag.a            the runtime (common/ gpu/ transport/ dag/), export list adag.map
#   libadag-data.so / libadag-data.a  the data stage (data/, include/adag/data.h), export list
#                                     adag-data.map; it links libadag through its public API only
# `make test` runs the suite; `make check` adds the sanitizer runs; `make test SAN=address,undefined` runs it under
# sanitizers (in build/san-*); `make test-tsan` runs the channel and communicator stress programs under TSan;
# `make install PREFIX=/usr/local` installs both libraries, the headers, the worker, adag.pc and adag-data.pc;
# `make test-gpu` runs tests/gpu on a CUDA device (skipped without one; not in check).

VERSION_MAJOR := 0
VERSION_MINOR := 3
VERSION := $(VERSION_MAJOR).$(VERSION_MINOR).0

CC ?= cc
PREFIX ?= /usr/local
SAN ?=
ifeq ($(SAN),)
BUILD ?= build
SANFLAGS :=
else
BUILD ?= build/san-$(subst $(comma),-,$(SAN))
SANFLAGS := -fsanitize=$(SAN) -fno-omit-frame-pointer
endif
comma := ,

OPT ?= -O2 -g
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-format-truncation \
    -fvisibility=hidden -fPIC $(OPT) $(SANFLAGS) -I include -I .
LDFLAGS_BASE := $(SANFLAGS)
# LIBS: what libadag links (CUDA and NCCL are loaded with dlopen);
# DATA_LIBS: what libadag-data links besides libadag.
LIBS := -lpthread -ldl -lm
# libarchive (Debian's libarchive-dev): the data stage's WebDataset shards
# (data/format_tar.c)
DATA_LIBS := $(shell pkg-config --libs libarchive 2>/dev/null || echo -larchive)
# libjpeg-turbo (Debian's libturbojpeg0-dev): the data stage's image map
# (data/image.c); libm for its crop draws
DATA_LIBS += $(shell pkg-config --libs libturbojpeg 2>/dev/null || echo -lturbojpeg) -lm
# libcurl (Debian's libcurl4-openssl-dev) and xxHash (libxxhash-dev): the data
# stage's http(s) shards and their disk cache's checksums (data/fetch.c, cache.c)
DATA_LIBS += $(shell pkg-config --libs libcurl 2>/dev/null || echo -lcurl) -lxxhash -lpthread
# hwloc (Debian's libhwloc-dev; libhwloc-plugins finds PCI devices) and
# libibverbs (libibverbs-dev): the topology map and placement (gpu/topo*.c)
LIBS += $(shell pkg-config --libs hwloc 2>/dev/null || echo -lhwloc) -libverbs

# UCX (Debian's libucx-dev): the ucx channel (transport/chan_ucx.c, ucx_domain.c);
# without it transport/chan_ucx_none.c says "built without UCX" at first use.
HAVE_UCX := $(shell pkg-config --exists ucx 2>/dev/null && echo 1)
UCX_SRCS := transport/chan_ucx.c transport/chan_ucx_msg.c transport/chan_ucx_dev.c transport/ucx_domain.c
ifeq ($(HAVE_UCX),1)
LIBS += -lucp -lucs
LIB_SKIP := transport/chan_ucx_none.c
else
LIB_SKIP := $(UCX_SRCS)
endif
# PMIx (Debian's libpmix-dev): adag-worker --pmix (tools/worker_pmix.c), only in
# adag-worker; without it that mode says "built without PMIx".
HAVE_PMIX := $(shell pkg-config --exists pmix 2>/dev/null && echo 1)
ifeq ($(HAVE_PMIX),1)
PMIX_CFLAGS := -DADAG_HAVE_PMIX $(shell pkg-config --cflags pmix)
PMIX_LIBS := $(shell pkg-config --libs pmix)
endif

# the public headers: adag.h and its parts (a module rebuilt when any changes)
ADAG_HEADERS := include/adag.h $(wildcard include/adag/*.h)
LIB_SRCS := $(filter-out $(LIB_SKIP),$(wildcard common/*.c transport/*.c gpu/*.c dag/*.c dag/*/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
SONAME := libadag.so.$(VERSION_MAJOR)

# libadag-data: data/*.c, and its own copy (hidden, like every internal
# name) of the stateless helpers of common/ it writes with: CPU lists,
# the params-struct check and the text writer. Those report only through
# libadag's public adag_fail/adag_last_error (common/error.h), so both
# libraries share one per-thread message and no other state. Everything
# else data/ needs of libadag is its public API (--no-undefined: a call
# of an internal adag__ function of libadag fails this link).
DATA_SHARED_SRCS := common/cpuset.c common/params.c common/out.c
DATA_SRCS := $(wildcard data/*.c) $(DATA_SHARED_SRCS)
DATA_OBJS := $(DATA_SRCS:%.c=$(BUILD)/obj/%.o)
DATA_SONAME := libadag-data.so.$(VERSION_MAJOR)
# programs using the data stage link both (shared: -ladag-data -ladag;
# static: libadag-data.a before libadag.a)
DATA_LINK := -L$(BUILD) -ladag-data -ladag
DATA_STATIC := $(BUILD)/libadag-data.a $(BUILD)/libadag.a

# tests/test_*.c: the API suite, linked with libadag-data.so and libadag.so like any program;
# tests/unit_*.c: unit tests of internals, linked with the static libraries (libadag-data.a first).
# tests/stress_ring.c, stress_dag.c, stress_device.c, stress_values.c: the channels and abort,
# whole DAGs and concurrent drivers, the emulated device and its value ops, under
# ThreadSanitizer (make test-tsan);
# tests/stress_comm.c: the host communicator, likewise.
TEST_SRCS := $(filter-out tests/unit_%.c tests/stress_%.c tests/fault_matrix%.c,$(wildcard tests/*.c))
# The test actor classes, in libtest_actors.so (process actors) and in the test
# programs (thread actors); shared_methods.c is compiled into adag-bench too;
# tensor_actors.c is the "tensor" class (tests/test_tensor.c), gpu_stage.c the
# device pipeline stage (tests/test_gpu_pipeline.c), geom_actors.c values of
# any size (tests/test_geometry.c).
TEST_ACTOR_SRCS := tests/modules/test_actors.c tests/modules/shared_methods.c tests/modules/tensor_actors.c \
                   tests/modules/gpu_stage.c tests/modules/probe_actors.c tests/modules/geom_actors.c
# The device-bound actor classes (tests/test_device_actor.c, tests/test_graph_capture.c):
# in adag-tests, and in a module of their own, libdevice_actors.so, for process actors.
DEVICE_ACTOR_SRCS := tests/modules/device_actors.c tests/modules/graph_actors.c
TEST_OBJS := $(TEST_SRCS:%.c=$(BUILD)/obj/%.o) $(TEST_ACTOR_SRCS:%.c=$(BUILD)/obj/%.o) \
    $(DEVICE_ACTOR_SRCS:%.c=$(BUILD)/obj/%.o)
UNIT_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/unit_*.c))
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))
# examples/llm/: a small transformer (model.c) and its safetensors file
# (safetensors.c), built into llm-gen and linked into adag-unit-tests
# (tests/unit_llm_model.c). jansson (Debian's libjansson-dev) reads and
# writes the safetensors JSON header.
LLM_SRCS := examples/llm/model.c examples/llm/safetensors.c
LLM_OBJS := $(LLM_SRCS:%.c=$(BUILD)/obj/%.o)
LLM_LIBS := $(shell pkg-config --libs jansson 2>/dev/null || echo -ljansson) -lm
LLM_GEN := $(BUILD)/examples/llm/llm-gen
# the sharded model over actors: the class module and the driver's graph builder
LLM_SHARD_MODULE := $(BUILD)/examples/llm/libllm_shard.so
LLM_SERVE_OBJS := $(BUILD)/obj/examples/llm/serve_graph.o $(BUILD)/obj/examples/llm/engine.o
BENCH_SRCS := $(wildcard bench/*.c) bench/modules/bench_actors.c bench/modules/bench_device.c \
    tests/modules/shared_methods.c
BENCH_MODULE := $(BUILD)/bench/libbench_actors.so
EXAMPLE_MODULES := $(patsubst examples/modules/%.c,$(BUILD)/examples/lib%.so,$(wildcard examples/modules/*.c))

TEST_MODULE := $(BUILD)/tests/modules/libtest_actors.so
DEVICE_TEST_MODULE := $(BUILD)/tests/modules/libdevice_actors.so
# modules built against another ABI (tests/modules/bad_abi.c, one per flag), and
# the test module linked with -ladag (the worker must still bind it to its copy)
BAD_ABI_MODULES := $(BUILD)/tests/modules/libbad_abi_newer.so $(BUILD)/tests/modules/libbad_abi_missing.so \
    $(BUILD)/tests/modules/libbad_abi_class.so
LINKED_TEST_MODULE := $(BUILD)/tests/modules/libtest_actors_linked.so
# a module that makes its classes when asked (ADAG_MODULE_RESOLVER)
RESOLVER_TEST_MODULE := $(BUILD)/tests/modules/libresolver_actors.so

ALL := $(BUILD)/libadag.so $(BUILD)/libadag.a $(BUILD)/libadag-data.so $(BUILD)/libadag-data.a \
    $(BUILD)/adag-worker $(BUILD)/adag-info \
    $(TEST_MODULE) $(DEVICE_TEST_MODULE) $(BAD_ABI_MODULES) $(LINKED_TEST_MODULE) $(RESOLVER_TEST_MODULE) $(BUILD)/tests/adag-tests $(BUILD)/tests/adag-unit-tests $(EXAMPLES) $(EXAMPLE_MODULES) \
    $(BUILD)/adag-bench $(BENCH_MODULE) $(BUILD)/tests/stress-comm $(BUILD)/tests/stress-data \
    $(BUILD)/tests/stress-trace $(BUILD)/tests/stress-values \
    $(BUILD)/tests/pmix-driver \
    $(BUILD)/adag-bench-hosts $(LLM_GEN) $(LLM_SHARD_MODULE)

# ---- CUDA ----
# gpu/cuda.c (the cuda device backend) takes the types of the toolkit's headers
# when $(CUDA_HOME)/include/cuda_runtime_api.h exists: -DADAG_HAVE_CUDA and
# -I$(CUDA_HOME)/include, for that file only. Nothing links -lcudart: the runtime
# is loaded with dlopen at first use. Without the headers the backend says
# "not built". tests/gpu/test-cuda (make test-gpu) is always built, and its
# kernel (tests/gpu/scale.cu) when $(NVCC) exists, so GPU code cannot rot.
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
NVCC_FLAGS ?= -O2
HAVE_CUDA := $(if $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),1)
HAVE_NVCC := $(if $(HAVE_CUDA),$(if $(wildcard $(NVCC)),1))
CUDA_CFLAGS := -DADAG_CUDA_HOME='"$(CUDA_HOME)"' $(if $(HAVE_CUDA),-DADAG_HAVE_CUDA -I$(CUDA_HOME)/include)
# gpu/comm_nccl.c (the nccl communicator backend) likewise takes nccl.h's types
# when $(CUDA_HOME)/include/nccl.h exists (-isystem: the header is not
# -Wstrict-prototypes clean); libnccl.so.2 is loaded with dlopen. Without the
# header the backend says "not built".
HAVE_NCCL := $(if $(HAVE_CUDA),$(if $(wildcard $(CUDA_HOME)/include/nccl.h),1))
NCCL_CFLAGS := -DADAG_CUDA_HOME='"$(CUDA_HOME)"' $(if $(HAVE_NCCL),-DADAG_HAVE_NCCL -isystem $(CUDA_HOME)/include)
# gpu/cuda.o and gpu/comm_nccl.o are rebuilt when what was found changes (e.g. a toolkit installed since)
CUDA_STAMP := $(BUILD)/obj/gpu/cuda.config
CUDA_CONFIG := CUDA_HOME=$(CUDA_HOME) headers=$(if $(HAVE_CUDA),yes,no) nccl=$(if $(HAVE_NCCL),yes,no)
$(shell mkdir -p $(dir $(CUDA_STAMP)) && [ "$$(cat $(CUDA_STAMP) 2>/dev/null)" = "$(CUDA_CONFIG)" ] \
    || echo "$(CUDA_CONFIG)" > $(CUDA_STAMP))
GPU_TEST := $(BUILD)/tests/gpu/test-cuda
GPU_KERNEL := $(if $(HAVE_NVCC),$(BUILD)/tests/gpu/libscale.so)
# tests/gpu/test-cuda-dag: the DAG scenarios with process actors on CUDA
# devices (public API, libadag.so), always built; its actor module with the
# kernels, libcuda_stage.so, when $(NVCC) exists.
GPU_DAG_TEST := $(BUILD)/tests/gpu/test-cuda-dag
GPU_DAG_MODULE := $(if $(HAVE_NVCC),$(BUILD)/tests/gpu/libcuda_stage.so)
# ... and its emulated twin (the emulated device, no CUDA), for test-cuda-dag --emulate
GPU_DAG_EMULATED_MODULE := $(BUILD)/tests/gpu/libcuda_stage_emulated.so
# examples/gpu_pipeline --device cuda loads the CUDA variant of its stage
# module: gpu_stages.c with -DGPU_STAGES_CUDA plus the kernel of
# gpu_stages_kernel.cu, linked by nvcc (the host variant, libgpu_stages.so,
# is an ordinary example module).
# examples/tp_pp --device cuda likewise loads libtp_mlp_cuda.so (tp_mlp.c with
# -DTP_MLP_CUDA plus tp_mlp_kernel.cu).
EXAMPLE_CUDA_MODULE := $(if $(HAVE_NVCC),$(BUILD)/examples/libgpu_stages_cuda.so \
    $(BUILD)/examples/libtp_mlp_cuda.so)
# examples/llm's shard class on CUDA: stage_actors.c with -DLLM_SHARD_CUDA
# plus the kernels of shard_kernels.cu, linked by nvcc.
LLM_SHARD_CUDA_MODULE := $(if $(HAVE_NVCC),$(BUILD)/examples/llm/libllm_shard_cuda.so)
# tests/gpu/test-llm-cuda: the serving engine over that class on CUDA
GPU_LLM_TEST := $(BUILD)/tests/gpu/test-llm-cuda
ALL += $(GPU_LLM_TEST) $(GPU_TEST) $(GPU_KERNEL) $(GPU_DAG_TEST) $(GPU_DAG_MODULE) $(GPU_DAG_EMULATED_MODULE) \
    $(EXAMPLE_CUDA_MODULE) $(LLM_SHARD_CUDA_MODULE)

# The MPI side of the allreduce rows (bench/peers/mpi_allreduce.c), built with
# $(MPICC) when it exists (Debian: openmpi-bin libopenmpi-dev) into
# $(BUILD)/bench/mpi-allreduce, where adag-bench looks for it; without it the
# rows say "skipped: mpicc not found". A baseline, so no sanitizer flags.
MPICC ?= mpicc
HAVE_MPICC := $(shell command -v $(MPICC) 2>/dev/null)
MPI_PEER := $(if $(HAVE_MPICC),$(BUILD)/bench/mpi-allreduce)
ALL += $(MPI_PEER)

.PHONY: all test test-tsan test-faults test-install check check-layers check-names test-python bench-python install clean demo demo-gpu demo-tp demo-loader bench bench-smoke bench-hosts \
    test-gpu plots plots-smoke
all: $(ALL)

$(BUILD)/obj/%.o: %.c $(wildcard include/*.h include/adag/*.h dag/*/*.h common/*.h transport/*.h gpu/*.h dag/*.h data/*.h tests/*.h tests/modules/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/gpu/cuda.o $(BUILD)/obj/gpu/cuda_stream.o $(BUILD)/obj/gpu/cuda_alias.o \
    $(BUILD)/obj/gpu/cuda_values.o $(BUILD)/obj/gpu/cuda_graph.o \
    $(BUILD)/obj/gpu/cuda_runtime.o: $(BUILD)/obj/gpu/%.o: gpu/%.c $(CUDA_STAMP) \
    $(wildcard include/*.h common/*.h gpu/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) $(CUDA_CFLAGS) -c $< -o $@

$(BUILD)/obj/gpu/comm_nccl.o: gpu/comm_nccl.c $(CUDA_STAMP) $(wildcard include/*.h common/*.h gpu/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) $(NCCL_CFLAGS) -c $< -o $@

# adag.map: libadag.so exports exactly the public API (tests/test_abi.c checks it).
$(BUILD)/libadag.so.$(VERSION): $(LIB_OBJS) adag.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=adag.map $(LDFLAGS_BASE) $(LDFLAGS) \
	    -o $@ $(LIB_OBJS) $(LIBS)

$(BUILD)/libadag.so: $(BUILD)/libadag.so.$(VERSION)
	ln -sf libadag.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf libadag.so.$(VERSION) $@

$(BUILD)/libadag.a: $(LIB_OBJS)
	rm -f $@
	ar rcs $@ $^

# adag-data.map: libadag-data.so exports exactly the ADAG_API functions of
# include/adag/data.h (tests/test_abi.c checks it); it finds libadag.so next
# to itself.
$(BUILD)/libadag-data.so.$(VERSION): $(DATA_OBJS) adag-data.map $(BUILD)/libadag.so
	$(CC) -shared -Wl,-soname,$(DATA_SONAME) -Wl,--version-script=adag-data.map -Wl,--no-undefined \
	    $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $(DATA_OBJS) -L$(BUILD) -ladag -Wl,-rpath,'$$ORIGIN' $(DATA_LIBS)

$(BUILD)/libadag-data.so: $(BUILD)/libadag-data.so.$(VERSION)
	ln -sf libadag-data.so.$(VERSION) $(BUILD)/$(DATA_SONAME)
	ln -sf libadag-data.so.$(VERSION) $@

$(BUILD)/libadag-data.a: $(DATA_OBJS)
	rm -f $@
	ar rcs $@ $^

# Programs link the shared library and find it next to themselves or one up.
RPATH := -Wl,-rpath,'$$ORIGIN:$$ORIGIN/..:$$ORIGIN/../..'

# adag-worker carries its own whole copy of the library (so libadag.so exports
# no internal entry point for it) and exports the public API from it, the list
# of adag.map, so the adag_call_* of the modules it loads bind to that copy.
$(BUILD)/adag-worker.dynlist: adag.map
	@mkdir -p $(dir $@)
	{ echo '{'; sed -n 's/^ *\(adag_[a-z0-9_]*\);.*/  \1;/p' $<; echo '};'; } > $@

$(BUILD)/obj/tools/worker_pmix.o: CFLAGS += $(PMIX_CFLAGS)

$(BUILD)/adag-worker: $(BUILD)/obj/tools/adag-worker.o $(BUILD)/obj/tools/worker_pmix.o \
    $(BUILD)/libadag.a $(BUILD)/adag-worker.dynlist
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -Wl,--dynamic-list=$(BUILD)/adag-worker.dynlist -o $@ \
	    $(BUILD)/obj/tools/adag-worker.o $(BUILD)/obj/tools/worker_pmix.o \
	    -Wl,--whole-archive $(BUILD)/libadag.a -Wl,--no-whole-archive $(LIBS) $(PMIX_LIBS)

# adag-info reads internal tables (settings), so it links the static library.
$(BUILD)/adag-info: $(BUILD)/obj/tools/adag-info.o $(BUILD)/obj/tools/info_topo.o \
    $(BUILD)/obj/tools/info_attach.o $(BUILD)/libadag.a
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LIBS)

$(TEST_MODULE): $(TEST_ACTOR_SRCS) $(wildcard tests/modules/*.h) $(ADAG_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -I tests/modules -shared -o $@ $(TEST_ACTOR_SRCS) $(LDFLAGS_BASE)

$(DEVICE_TEST_MODULE): $(DEVICE_ACTOR_SRCS) tests/modules/device_actors.h tests/modules/graph_actors.h \
    $(ADAG_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -DADAG_DEVICE_ACTORS_MODULE -shared -o $@ $(DEVICE_ACTOR_SRCS) \
	    $(LDFLAGS_BASE)

$(BAD_ABI_MODULES): $(BUILD)/tests/modules/libbad_abi_%.so: tests/modules/bad_abi.c $(ADAG_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -DBAD_ABI_$(shell echo $* | tr a-z A-Z) -shared -o $@ $< $(LDFLAGS_BASE)

$(RESOLVER_TEST_MODULE): tests/modules/resolver_actors.c $(ADAG_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -shared -o $@ $< $(LDFLAGS_BASE)

$(LINKED_TEST_MODULE): $(TEST_ACTOR_SRCS) $(wildcard tests/modules/*.h) $(ADAG_HEADERS) $(BUILD)/libadag.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -I tests/modules -shared -o $@ $(TEST_ACTOR_SRCS) $(LDFLAGS_BASE) -L$(BUILD) -ladag \
	    -Wl,-rpath,'$$ORIGIN/../..'

$(BUILD)/obj/tests/%.o: CFLAGS += -I tests/modules -DADAG_TEST_MODULE='"$(abspath $(TEST_MODULE))"' \
    -DADAG_TEST_DEVICE_MODULE='"$(abspath $(DEVICE_TEST_MODULE))"' \
    -DADAG_TEST_BUILD_DIR='"$(abspath $(BUILD))"' -DADAG_TEST_SRC_DIR='"$(abspath .)"'

$(BUILD)/tests/adag-tests: $(TEST_OBJS) $(LLM_SERVE_OBJS) $(LLM_OBJS) $(BUILD)/libadag.so $(BUILD)/libadag-data.so
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $(TEST_OBJS) $(LLM_SERVE_OBJS) $(LLM_OBJS) $(DATA_LINK) $(RPATH) \
	    -lcriterion $(LIBS) $(DATA_LIBS) $(LLM_LIBS)

# adag-bench-hosts (bench/hosts/bench_hosts.c): DAGs across two network
# namespaces against ucx_perftest over the same link (root; `make bench-hosts`).
$(BUILD)/adag-bench-hosts: bench/hosts/bench_hosts.c tests/netns_rig.c tests/netns_rig.h \
    $(BUILD)/libadag.so $(BENCH_MODULE) $(ADAG_HEADERS)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -I tests -DADAG_BENCH_BUILD_DIR='"$(abspath $(BUILD))"' \
	    $(LDFLAGS_BASE) $(LDFLAGS) -o $@ bench/hosts/bench_hosts.c tests/netns_rig.c \
	    -L$(BUILD) -ladag $(RPATH) $(LIBS)

bench-hosts: $(BUILD)/adag-bench-hosts $(BUILD)/adag-worker
	$(BUILD)/adag-bench-hosts

# The driver that tests/test_pmix.c runs under mpirun (rank 0 of
# `adag-worker --pmix -- pmix-driver`): a program of the public API only.
$(BUILD)/tests/pmix-driver: tests/programs/pmix_driver.c $(BUILD)/libadag.so $(TEST_MODULE) $(ADAG_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -DADAG_TEST_MODULE='"$(abspath $(TEST_MODULE))"' $(LDFLAGS_BASE) $(LDFLAGS) \
	    -o $@ $< -L$(BUILD) -ladag $(RPATH) $(LIBS)

$(BUILD)/tests/adag-unit-tests: $(UNIT_OBJS) $(LLM_OBJS) $(DATA_STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $(UNIT_OBJS) $(LLM_OBJS) $(DATA_STATIC) -lcriterion $(LIBS) $(DATA_LIBS) \
	    $(LLM_LIBS)

# examples/llm/: its objects see its headers; llm-gen is a plain program
# (no libadag yet).
$(LLM_OBJS) $(LLM_SERVE_OBJS) $(BUILD)/obj/tests/unit_llm_model.o $(BUILD)/obj/tests/test_llm_actors.o $(BUILD)/obj/tests/test_llm_engine.o: \
    $(wildcard examples/llm/*.h)
# libllm_shard.so: the "llm_shard" class with the model compiled in (adag-worker
# loads it; its adag_call_* calls bind to the worker's libadag)
$(LLM_SHARD_MODULE): examples/llm/stage_actors.c $(LLM_SRCS) $(wildcard examples/llm/*.h) $(ADAG_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -shared -o $@ examples/llm/stage_actors.c $(LLM_SRCS) $(LDFLAGS_BASE) \
	    $(LLM_LIBS)
$(LLM_GEN): examples/llm/llm_gen.c $(LLM_OBJS) $(wildcard examples/llm/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ examples/llm/llm_gen.c $(LLM_OBJS) $(LLM_LIBS)

$(BUILD)/examples/lib%.so: examples/modules/%.c $(ADAG_HEADERS) $(wildcard examples/modules/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -shared -o $@ $< $(LDFLAGS_BASE)

# an example that includes adag/data.h links libadag-data too
DATA_EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(shell grep -l 'adag/data\.h' examples/*.c))
$(DATA_EXAMPLES): EXAMPLE_LINK := $(DATA_LINK)
$(DATA_EXAMPLES): $(BUILD)/libadag-data.so
EXAMPLE_LINK ?= -L$(BUILD) -ladag
$(BUILD)/examples/%: examples/%.c $(BUILD)/libadag.so $(wildcard examples/modules/*.h) examples/example_util.h \
    examples/jpeg_shards.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -DADAG_EXAMPLE_DIR='"$(abspath $(BUILD))/examples"' \
	    $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $< $(EXAMPLE_LINK) $(RPATH) $(LIBS) $(DATA_LIBS)

# adag-bench: the harness (bench/*.c) and its actor module. It links the
# static libraries (libadag-data.a for the data rows, libadag.a), as adag-info
# does: the raw device baselines drive the device ops table (gpu/device.h),
# which libadag.so does not export. Process actors
# run the module in adag-worker (found next to adag-bench), thread actors the
# classes linked in here. The llm rows (bench/llm.c) drive examples/llm's
# step DAG (serve_graph.o, model.o; safetensors.o needs jansson) over the
# llm_shard actors, whose module they find next to it like adag-worker.
BENCH_MODULE_SRCS := bench/modules/bench_actors.c bench/modules/bench_device.c tests/modules/shared_methods.c
$(BENCH_MODULE): $(BENCH_MODULE_SRCS) bench/modules/bench_actors.h tests/modules/shared_methods.h $(ADAG_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -I tests/modules -shared -o $@ $(BENCH_MODULE_SRCS) $(LDFLAGS_BASE) -ldl

$(BUILD)/adag-bench: $(BENCH_SRCS) $(GPU_KERNEL) $(wildcard bench/*.h) bench/modules/bench_actors.h tests/modules/shared_methods.h \
    $(DATA_STATIC) $(BUILD)/adag-worker examples/jpeg_shards.h $(wildcard examples/llm/*.h) \
    $(LLM_SERVE_OBJS) $(LLM_OBJS) $(LLM_SHARD_MODULE) \
    $(wildcard include/*.h include/adag/*.h common/*.h gpu/*.h data/*.h)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -I bench -I tests/modules -DADAG_BENCH_PEERS='"$(abspath bench/peers)"' \
	    -DADAG_BENCH_SCALE_KERNEL='"$(if $(GPU_KERNEL),$(abspath $(GPU_KERNEL)))"' \
	    $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $(BENCH_SRCS) $(LLM_SERVE_OBJS) $(LLM_OBJS) $(DATA_STATIC) $(LIBS) \
	    $(DATA_LIBS) $(LLM_LIBS)

# bench/peers/mpi_allreduce.c with $(MPICC) (see MPI_PEER above)
$(BUILD)/bench/mpi-allreduce: bench/peers/mpi_allreduce.c
	@mkdir -p $(dir $@)
	$(MPICC) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow $(OPT) -o $@ $<

bench: all
	$(BUILD)/adag-bench $(BENCH_ARGS)

# The suite: every test runs in its own process (Criterion), two at a time.
TEST_JOBS ?= 2
# Under sanitizers, leaks in Criterion's own runner are suppressed (ours are not).
export LSAN_OPTIONS := suppressions=$(abspath tests/lsan.supp):print_suppressions=0
export UBSAN_OPTIONS := print_stacktrace=1:halt_on_error=1

test: all
	$(BUILD)/tests/adag-unit-tests --jobs $(TEST_JOBS) $(TEST_ARGS)
	$(BUILD)/tests/adag-tests --jobs $(TEST_JOBS) $(TEST_ARGS)

# the stress programs and test-tsan
include tests/stress.mk

# Everything CI runs: the suite, the suite under ASan+UBSan, the channel and
# driver stress under TSan, the fault matrix, and each fuzzer for a bounded time.
CHECK_FUZZ_SECONDS ?= 15
check: check-layers check-names test bench-smoke plots-smoke test-install test-python test-llm
	$(MAKE) SAN=address,undefined test
	$(MAKE) test-tsan
	$(MAKE) test-faults
	$(MAKE) fuzz-run FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)

# Folders point down only (common < gpu < transport < dag < data < tools,
# bench), no cycle between folders, and the data stage (data/) feeds a DAG
# through the public API (include/adag.h), including no header of dag/.
check-layers:
	@python3 tests/check_layers.py

# Internal names are visibly internal: a function the library defines
# either is the contract (ADAG_API, listed in adag.map) or is named adag__*
# (or is static); nothing else may take the public adag_ prefix.
check-names: $(BUILD)/libadag.a $(BUILD)/libadag-data.a
	@for l in libadag:adag.map libadag-data:adag-data.map; do \
	    lib=$${l%%:*}; map=$${l#*:}; \
	    nm $(BUILD)/$$lib.a | awk '$$2 ~ /^[TW]$$/ {print $$3}' | grep '^adag_' | \
	        grep -v '^adag__' | sort -u > $(BUILD)/names.defined; \
	    grep -o 'adag_[a-z0-9_]*' $$map | sort -u > $(BUILD)/names.exported; \
	    if comm -23 $(BUILD)/names.defined $(BUILD)/names.exported | grep .; then \
	        echo "check-names: functions above of $$lib take the public adag_ prefix but are not in $$map: name them adag__*" >&2; \
	        exit 1; \
	    fi; \
	done
	@echo "check-names: every adag_ function is in adag.map (libadag) or adag-data.map (libadag-data); internal ones are adag__*"

# The harness runs once, quickly, to prove it works (it asserts no timing):
# every scenario must run, check its results and print valid JSON (a row
# that cannot run here, e.g. CUDA without a GPU, says "skipped" and is not
# counted); then the device pipeline and the TP x PP examples run once
# (demo-gpu, demo-tp).
bench-smoke: all
	$(BUILD)/adag-bench --quick --json > $(BUILD)/bench-quick.json
	python3 -m json.tool $(BUILD)/bench-quick.json > /dev/null
	@echo "bench-smoke: $$(grep -c '"skipped": null' $(BUILD)/bench-quick.json) results," \
	    "$$(grep -c '"skipped": "' $(BUILD)/bench-quick.json) skipped (not counted), valid JSON"
	$(MAKE) --no-print-directory demo-gpu
	$(MAKE) --no-print-directory demo-tp
	$(MAKE) --no-print-directory demo-loader

# The plots (bench/plot.py) from the quick bench's JSON, into $(BUILD)/plots:
# each of the four must be well-formed SVG (tests/check_plots.py); no figure
# is asserted, and a plot whose rows did not run says "no data".
# PLOT_PYTHON: the first python3 that has matplotlib (setup.sh installs
# Debian's python3-matplotlib for /usr/bin/python3, which another python3
# earlier on PATH, e.g. pyenv's, does not see).
PLOT_PYTHON ?= $(shell for p in python3 /usr/bin/python3; do \
    $$p -c 'import matplotlib' 2>/dev/null && { echo $$p; exit 0; }; done; echo python3)
plots-smoke: bench-smoke
	$(PLOT_PYTHON) bench/plot.py --out $(BUILD)/plots $(BUILD)/bench-quick.json
	python3 tests/check_plots.py $(BUILD)/plots

# docs/perf/*.svg (bench/plot.py): adag-bench runs only the rows the plots
# draw (--only, a run each; the chain again at more stage counts), with Ray
# Compiled Graphs beside the chain and payload rows where Ray is installed
# (--vs-ray; Ray Data beside data-images likewise, Open MPI beside allreduce
# where mpicc is), their rows together in $(BUILD)/bench.json; then
# adag-bench-hosts --quick (root; else the plot says why its rows are
# absent). About 4 minutes on a 2-core machine without Ray.
PLOTS_OUT ?= docs/perf
PLOTS_ROWS ?= roundtrip chain payload payload-zc allreduce allreduce-dag allreduce-nccl-dag data-images
PLOTS_RAY_ROWS ?= chain payload
# each row measured PLOTS_REPS times, the median kept (this machine is shared
# and noisy), but data-images: its figures are medians of rounds already
PLOTS_REPS ?= 3
PLOTS_CHAIN_N ?= 2 8 16
PLOTS_RUNS := $(BUILD)/plots-data
plots: all
	rm -rf $(PLOTS_RUNS) && mkdir -p $(PLOTS_RUNS)
	for s in $(PLOTS_ROWS); do \
	    ray=; case " $(PLOTS_RAY_ROWS) " in *" $$s "*) ray=--vs-ray;; esac; \
	    reps="--reps $(PLOTS_REPS)"; [ $$s != data-images ] || reps=; \
	    $(BUILD)/adag-bench --json --only $$s $$ray $$reps > $(PLOTS_RUNS)/$$s.json || exit 1; \
	done
	for n in $(PLOTS_CHAIN_N); do \
	    $(BUILD)/adag-bench --json --only chain --n $$n --reps $(PLOTS_REPS) \
	        > $(PLOTS_RUNS)/chain-n$$n.json || exit 1; \
	done
	$(PLOT_PYTHON) -c 'import json, sys; json.dump([r for f in sys.argv[1:] for r in json.load(open(f))], sys.stdout, indent=1)' \
	    $(foreach s,$(PLOTS_ROWS),$(PLOTS_RUNS)/$(s).json) $(foreach n,$(PLOTS_CHAIN_N),$(PLOTS_RUNS)/chain-n$(n).json) \
	    > $(BUILD)/bench.json
	$(BUILD)/adag-bench-hosts --quick --json > $(BUILD)/bench-hosts.json || \
	    echo "skipped: adag-bench-hosts failed (see the output of make plots)" > $(BUILD)/bench-hosts.json
	$(PLOT_PYTHON) bench/plot.py --out $(PLOTS_OUT) --hosts $(BUILD)/bench-hosts.json $(BUILD)/bench.json

demo: all
	$(BUILD)/examples/pipeline_demo

# examples/gpu_pipeline, small: 4 device-bound process actors on the
# emulated device (zero-copy and peer-copy edges), every element checked,
# traced: every span of its trace checked (tests/trace_check.py; its device
# copies inside their waits and publishes), its figures printed.
# GPU_DEMO_ARGS="--device cuda" runs it on CUDA where there is one.
GPU_DEMO_ARGS ?= --device emu
demo-gpu: all
	$(BUILD)/examples/gpu_pipeline $(GPU_DEMO_ARGS) --shape 16x256 --iters 300 \
	    --dot $(BUILD)/gpu_pipeline.dot --trace $(BUILD)/gpu_pipeline_trace.json --stats
	python3 tests/trace_check.py $(BUILD)/gpu_pipeline_trace.json 4 forward backend

# examples/tp_pp: TP-2 x PP-2 MLP blocks, 4 device-bound process actors on
# emu:0..3, an allreduce per stage, every element checked.
# TP_DEMO_ARGS="--device cuda" runs it on CUDA where there are 4 GPUs.
TP_DEMO_ARGS ?= --device emu
demo-tp: all
	$(BUILD)/examples/tp_pp $(TP_DEMO_ARGS) --iters 500 --inflight 4 --dot $(BUILD)/tp_pp.dot

# examples/loader_pipeline: the data front stage (JPEGs it writes itself) feeding
# a 2-stage process DAG, a progress bar on a terminal, the source's stats
demo-loader: all
	$(BUILD)/examples/loader_pipeline --epochs 2 --dot $(BUILD)/loader.dot

# include/adag.h's parts (by topic; adag.h includes them all)
ADAG_H_PARTS := $(addprefix include/adag/,core.h value.h class.h config.h actor.h graph.h dag.h)
install: all
	install -d $(DESTDIR)$(PREFIX)/lib/adag $(DESTDIR)$(PREFIX)/include \
	    $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BUILD)/libadag.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libadag.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf libadag.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libadag.so
	install -m 0644 $(BUILD)/libadag.a $(DESTDIR)$(PREFIX)/lib/
	install -m 0755 $(BUILD)/libadag-data.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libadag-data.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(DATA_SONAME)
	ln -sf libadag-data.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libadag-data.so
	install -m 0644 $(BUILD)/libadag-data.a $(DESTDIR)$(PREFIX)/lib/
	install -m 0644 include/adag.h $(DESTDIR)$(PREFIX)/include/
	install -d $(DESTDIR)$(PREFIX)/include/adag
	install -m 0644 include/adag/data.h include/adag/stats.h $(DESTDIR)$(PREFIX)/include/adag/
	install -m 0644 $(ADAG_H_PARTS) $(DESTDIR)$(PREFIX)/include/adag/
	install -m 0755 $(BUILD)/adag-worker $(DESTDIR)$(PREFIX)/lib/adag/adag-worker
	install -m 0755 $(BUILD)/adag-info $(DESTDIR)$(PREFIX)/bin/adag-info
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@LIBS@|$(LIBS)|' adag.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/adag.pc
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@LIBS@|$(DATA_LIBS)|' \
	    adag-data.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/adag-data.pc

# The installed files alone work: install into a scratch prefix, build
# pipeline_demo and its module there with pkg-config, and run it with process
# actors, so the installed adag-worker (found next to the installed libadag)
# loads the module and runs its methods; then build loader_pipeline with
# `pkg-config adag-data` (the installed adag/data.h, libadag-data.so, which
# finds the installed libadag.so) and run it for an epoch of the JPEG shards
# it writes, feeding the same module's stages. (Its own JPEG writer,
# examples/jpeg_shards.h, calls libturbojpeg: $(DATA_LIBS) on its line.)
INSTALL_TEST := $(abspath $(BUILD))/install-test
INSTALL_TEST_PC := PKG_CONFIG_PATH=$(INSTALL_TEST)/usr/lib/pkgconfig pkg-config
# the repo's include/ is not on the path: the installed adag.h must do
INSTALL_TEST_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror $(OPT) $(SANFLAGS)
test-install: all
	rm -rf $(INSTALL_TEST)
	$(MAKE) --no-print-directory install PREFIX=$(INSTALL_TEST)/usr > /dev/null
	$(CC) $(INSTALL_TEST_CFLAGS) -fPIC -shared -I examples/modules $$($(INSTALL_TEST_PC) --cflags adag) \
	    -o $(INSTALL_TEST)/libstages.so examples/modules/stages.c
	$(CC) $(INSTALL_TEST_CFLAGS) -I examples/modules -DADAG_EXAMPLE_DIR='"$(INSTALL_TEST)"' \
	    -o $(INSTALL_TEST)/pipeline_demo examples/pipeline_demo.c \
	    $$($(INSTALL_TEST_PC) --cflags --libs adag) -Wl,-rpath,$(INSTALL_TEST)/usr/lib $(LIBS)
	$(INSTALL_TEST)/pipeline_demo --iters 200 > $(INSTALL_TEST)/pipeline_demo.out
	@echo "test-install: pipeline_demo ran with process actors on the installed files" \
	    "(library, adag.h, adag.pc, adag-worker)"
	$(CC) $(INSTALL_TEST_CFLAGS) -I examples -I examples/modules -DADAG_EXAMPLE_DIR='"$(INSTALL_TEST)"' \
	    -o $(INSTALL_TEST)/loader_pipeline examples/loader_pipeline.c \
	    $$($(INSTALL_TEST_PC) --cflags --libs adag-data) -Wl,-rpath,$(INSTALL_TEST)/usr/lib $(DATA_LIBS)
	readelf -d $(INSTALL_TEST)/loader_pipeline | grep -q 'NEEDED.*\[libadag-data\.so\.$(VERSION_MAJOR)\]'
	$(INSTALL_TEST)/loader_pipeline --epochs 1 > $(INSTALL_TEST)/loader_pipeline.out
	@echo "test-install: loader_pipeline ran on the installed data stage" \
	    "(libadag-data, adag/data.h, adag-data.pc)"

clean:
	rm -rf build

# ---- GPU tests (tests/gpu/README.md) ----
# test-cuda links the static library (the backend's table is internal) and
# loads the kernel module, built by nvcc against the shared CUDA runtime.
GPU_TEST_SRCS := tests/gpu/test_cuda.c tests/gpu/cuda_values.c
$(GPU_TEST): $(GPU_TEST_SRCS) tests/gpu/test_cuda.h $(BUILD)/libadag.a $(CUDA_STAMP) \
    $(wildcard include/*.h common/*.h gpu/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -DADAG_TEST_GPU_KERNEL='"$(if $(GPU_KERNEL),$(abspath $(GPU_KERNEL)))"' \
	    -DADAG_TEST_NVCC='"$(NVCC)"' $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $(GPU_TEST_SRCS) $(BUILD)/libadag.a $(LIBS)

# The CUDA variant of example module <m>: <m>.c with -D<M>_CUDA (upper case)
# plus the kernels of <m>_kernel.cu, linked by nvcc.
$(EXAMPLE_CUDA_MODULE): $(BUILD)/examples/lib%_cuda.so: examples/modules/%.c \
    examples/modules/%_kernel.cu examples/modules/%.h $(ADAG_HEADERS)
	@mkdir -p $(dir $@) $(BUILD)/obj/examples
	$(CC) $(filter-out $(SANFLAGS),$(CFLAGS_BASE)) $(CFLAGS) -D$(shell echo $* | tr a-z A-Z)_CUDA -c \
	    -o $(BUILD)/obj/examples/$*_cuda.o examples/modules/$*.c
	$(NVCC) $(NVCC_FLAGS) --cudart shared -shared -Xcompiler -fPIC -I include -o $@ \
	    examples/modules/$*_kernel.cu $(BUILD)/obj/examples/$*_cuda.o \
	    -Xlinker -rpath,$(CUDA_HOME)/lib64

$(BUILD)/tests/gpu/libscale.so: tests/gpu/scale.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) --cudart shared -shared -Xcompiler -fPIC -o $@ $< \
	    -Xlinker -rpath,$(CUDA_HOME)/lib64

# test-cuda-dag links libadag.so like tests/test_*.c (the public API only),
# with tests/probes.c (child processes) and the C reference of
# tests/modules/gpu_stage.h; its process actors load libcuda_stage.so:
# cuda_stage.c (the class, by cc) and cuda_stage_kernels.cu, linked by nvcc
# against the shared CUDA runtime, like libgpu_stages_cuda.so.
GPU_DAG_SRCS := tests/gpu/test_cuda_dag.c tests/gpu/cuda_dag_common.c tests/gpu/cuda_dag_faults.c \
    tests/gpu/cuda_dag_coll.c tests/gpu/cuda_dag_ahead.c tests/probes.c
$(GPU_DAG_TEST): $(GPU_DAG_SRCS) tests/gpu/cuda_dag.h tests/gpu/cuda_stage.h tests/modules/gpu_stage.h \
    tests/probes.h $(BUILD)/libadag.so $(CUDA_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -I tests -I tests/modules \
	    -DADAG_TEST_CUDA_MODULE='"$(if $(GPU_DAG_MODULE),$(abspath $(GPU_DAG_MODULE)))"' \
	    -DADAG_TEST_CUDA_EMULATED_MODULE='"$(abspath $(GPU_DAG_EMULATED_MODULE))"' \
	    -DADAG_TEST_NVCC='"$(NVCC)"' $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $(GPU_DAG_SRCS) \
	    -L$(BUILD) -ladag $(RPATH) $(LIBS) -lm

$(BUILD)/tests/gpu/libcuda_stage.so: tests/gpu/cuda_stage.c tests/gpu/cuda_stage_kernels.cu \
    tests/gpu/cuda_stage.h $(ADAG_HEADERS)
	@mkdir -p $(dir $@) $(BUILD)/obj/tests/gpu
	$(CC) $(filter-out $(SANFLAGS),$(CFLAGS_BASE)) $(CFLAGS) -c \
	    -o $(BUILD)/obj/tests/gpu/cuda_stage_class.o tests/gpu/cuda_stage.c
	$(NVCC) $(NVCC_FLAGS) --cudart shared -shared -Xcompiler -fPIC -I include -o $@ \
	    tests/gpu/cuda_stage_kernels.cu $(BUILD)/obj/tests/gpu/cuda_stage_class.o \
	    -Xlinker -rpath,$(CUDA_HOME)/lib64

# The same class for the emulated device: its kernels are host work on
# the compute stream (test-cuda-dag --emulate checks the test program here).
$(GPU_DAG_EMULATED_MODULE): tests/gpu/cuda_stage.c tests/gpu/cuda_stage.h tests/modules/gpu_stage.h \
    $(ADAG_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -DCUDA_STAGE_EMULATED -I tests/modules -shared -o $@ $< \
	    $(LDFLAGS_BASE)

# Not part of `make check` (CI has no GPU). Runs both programs
# (tests/gpu/run-tests.sh), each under a hard limit; each exits 0 (none failed, one passed at least), 77 (every
# test skipped: "skipped: <reason>" per test) or 1 (one failed). A program
# that skipped everything is SKIPPED, never passed; TEST_GPU_REQUIRE=1 (a
# runner that has a GPU) makes that a failure, and test-cuda-dag then fails
# a test skipped for any reason but "needs 2 CUDA devices". CUDA under ASan
# needs the shadow gap unprotected (the driver maps memory there).
TEST_GPU_REQUIRE ?=
GPU_TEST_ENV := TEST_GPU_REQUIRE="$(TEST_GPU_REQUIRE)" \
    $(if $(findstring address,$(SAN)),ASAN_OPTIONS=protect_shadow_gap=0)
test-gpu: $(GPU_TEST) $(GPU_KERNEL) $(GPU_DAG_TEST) $(GPU_DAG_MODULE) $(BUILD)/adag-worker
	@$(GPU_TEST_ENV) tests/gpu/run-tests.sh $(BUILD)

# ---- fuzzing (libFuzzer, clang) ----
# Fuzz targets for the decoders that read a peer's bytes, and the data stage's
# header parsers (tests/fuzz/README.md):
#   make fuzz        builds build/fuzz/fuzz_{wire,program,control,npy,megatron,tar,jpeg} (clang, ASan+UBSan)
#   make fuzz-run    runs each for FUZZ_SECONDS (default 20), one after the other,
#                    on a scratch copy of its seeds (build/fuzz/work/<t>); fails on
#                    any crash, leak, sanitizer report or failed check
#   make fuzz-seeds  regenerates the seed files in tests/fuzz/corpus with the real encoders
#   make fuzz-merge  by hand: adds what fuzz-run found that covers new code to
#                    tests/fuzz/corpus (review the size before committing)
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 20
FUZZ_TARGETS := wire program control npy megatron tar jpeg
FUZZ_DIR := build/fuzz
FUZZ_CORPUS ?= tests/fuzz/corpus
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
    -O1 -g $(FUZZ_SAN) -I include -I .
# what the decoders link against: wire, control, protocol, the channel backends
# (the device channel uses the device backends), the program and the DAG
# context (domain import, and the communicator table it holds, with the
# emulated device that table may open), errors and settings
FUZZ_LIB_OBJS := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(filter-out $(LIB_SKIP),$(wildcard common/*.c \
    transport/*.c gpu/*.c)) dag/exec/program.c dag/exec/context.c dag/exec/actor_comm.c dag/exec/actor_device.c \
    data/npy.c data/megatron_idx.c data/why.c data/shard.c data/formats.c data/format_tar.c \
    data/image.c data/sample.c data/order.c)
FUZZ_HDRS := $(wildcard include/*.h include/adag/*/*.h common/*.h transport/*.h dag/*.h data/*.h \
    tests/fuzz/*.h)

.PHONY: fuzz fuzz-run fuzz-seeds fuzz-merge fuzz-cc
fuzz: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)

fuzz-cc:
	@$(FUZZ_CC) --version 2>/dev/null | grep -q clang || { \
	    echo "fuzz: '$(FUZZ_CC)' is not clang (or not installed): libFuzzer needs clang;" \
	         "install it (./setup.sh, or apt-get install clang) or set FUZZ_CC=clang-NN" >&2; \
	    exit 1; }

# library objects: coverage-instrumented, without libFuzzer's main
$(FUZZ_DIR)/obj/%.o: %.c $(FUZZ_HDRS) | fuzz-cc
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_OBJS) $(FUZZ_HDRS) | fuzz-cc
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_OBJS) $(LIBS) $(DATA_LIBS)

$(FUZZ_DIR)/make_seeds: tests/fuzz/make_seeds.c $(FUZZ_LIB_OBJS) $(FUZZ_HDRS) | fuzz-cc
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_LIB_OBJS) $(LIBS) $(DATA_LIBS)

# libFuzzer exits non-zero on a finding; its log and the input that caused it
# (crash-*, leak-*, ...) stay in build/fuzz/<t>.log and build/fuzz/artifacts/<t>/.
fuzz-run: fuzz
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(FUZZ_DIR)/work/$$t $(FUZZ_DIR)/artifacts/$$t && \
	    cp $(FUZZ_CORPUS)/$$t/* $(FUZZ_DIR)/work/$$t/ && \
	    echo "fuzz-run: fuzz_$$t for $(FUZZ_SECONDS)s" && \
	    if $(FUZZ_DIR)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=1024 \
	        -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/artifacts/$$t/ \
	        $(FUZZ_DIR)/work/$$t > $(FUZZ_DIR)/$$t.log 2>&1; then \
	        grep -E '^Done [0-9]+ runs|^stat::new_units_added' $(FUZZ_DIR)/$$t.log; \
	    else \
	        tail -n 60 $(FUZZ_DIR)/$$t.log; \
	        echo "fuzz-run: fuzz_$$t FAILED; log $(FUZZ_DIR)/$$t.log," \
	             "input in $(FUZZ_DIR)/artifacts/$$t/ (rerun: $(FUZZ_DIR)/fuzz_$$t FILE)" >&2; \
	        exit 1; \
	    fi; \
	done

fuzz-seeds: $(FUZZ_DIR)/make_seeds
	$(FUZZ_DIR)/make_seeds $(FUZZ_CORPUS)

fuzz-merge: fuzz
	@for t in $(FUZZ_TARGETS); do \
	    $(FUZZ_DIR)/fuzz_$$t -merge=1 -rss_limit_mb=1024 $(FUZZ_CORPUS)/$$t \
	        $(FUZZ_DIR)/work/$$t 2>&1 | grep -E 'MERGE-OUTER: [0-9]+ new files' || exit 1; \
	done
	@du -sh --apparent-size $(FUZZ_CORPUS)

# ---- fault matrix ----
# tests/fault_matrix*.c: a plain program (it forks drivers and kills them, so
# not Criterion) that injects faults (killed/stopped driver or worker, exit
# or segfault in a method) at each phase and checks what is left behind.
# `make test-faults FAULT_ARGS="--seconds 20"`; it prints
# "fault-matrix: N passed, M failed[, K skipped]" last.
FAULT_ARGS ?=

FAULT_SRCS := $(wildcard tests/fault_matrix*.c) tests/builders.c tests/probes.c $(TEST_ACTOR_SRCS)
FAULT_OBJS := $(FAULT_SRCS:%.c=$(BUILD)/obj/%.o)

$(BUILD)/tests/fault-matrix: $(FAULT_OBJS) $(BUILD)/libadag.so
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $(FAULT_OBJS) -L$(BUILD) -ladag $(RPATH) $(LIBS)

.PHONY: test-faults
# A hard limit on the whole run: a hang is a failure, never a stuck CI.
test-faults: $(BUILD)/tests/fault-matrix $(BUILD)/adag-worker $(TEST_MODULE)
	timeout --kill-after=10 240 $(BUILD)/tests/fault-matrix $(FAULT_ARGS)

# ---- Python ----
# test-python (the package built into $(BUILD)/python, its pytest suite) and
# bench-python (the same Python actors with adag and with Ray): python/python.mk
include python/python.mk
# llm-server, llm-loadgen, test-llm, demo-llm (the LLM example's HTTP side)
include examples/llm/llm.mk
