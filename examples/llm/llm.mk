# examples/llm/llm.mk, included by the top Makefile (which defines BUILD,
# CFLAGS_BASE, RPATH, LLM_OBJS, LLM_SERVE_OBJS, LLM_LIBS, LLM_GEN,
# LLM_SHARD_MODULE, LLM_SHARD_CUDA_MODULE, GPU_LLM_TEST and `all`): the LLM
# example's programs beyond the library's tests.
#   libllm_shard_cuda.so  the shard class on CUDA (stage_actors.c with
#                -DLLM_SHARD_CUDA plus shard_kernels.cu, linked by nvcc),
#                built when nvcc exists
#   tests/gpu/test-llm-cuda  the engine over it (make test-gpu)
#   llm-server   the OpenAI-compatible server over the serving engine
#                (server*.c); libmicrohttpd (Debian's libmicrohttpd-dev)
#   llm-loadgen  its load generator (loadgen.c); libcurl
#   make test-llm  the server with real clients (curl, the openai package)
#                  against the reference (tests/llm/test_server.py, pytest)
#   make demo-llm  a short transcript (examples/llm/demo.py)
LLM_SERVER := $(BUILD)/examples/llm/llm-server
LLM_LOADGEN := $(BUILD)/examples/llm/llm-loadgen
LLM_SERVER_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,examples/llm/server.c examples/llm/server_http.c \
    examples/llm/server_api.c examples/llm/server_metrics.c)
MHD_LIBS := $(shell pkg-config --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
CURL_LIBS := $(shell pkg-config --libs libcurl 2>/dev/null || echo -lcurl)

all: $(LLM_SERVER) $(LLM_LOADGEN)

$(LLM_SERVER_OBJS): $(wildcard examples/llm/*.h)
$(LLM_SERVER): $(LLM_SERVER_OBJS) $(LLM_SERVE_OBJS) $(LLM_OBJS) $(BUILD)/libadag.so $(LLM_SHARD_MODULE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $(LLM_SERVER_OBJS) $(LLM_SERVE_OBJS) $(LLM_OBJS) -L$(BUILD) -ladag \
	    $(RPATH) $(LIBS) $(MHD_LIBS) $(LLM_LIBS)
$(LLM_LOADGEN): examples/llm/loadgen.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $< $(CURL_LIBS) -lm -lpthread

# The Python of the tests: the first python3 with pytest and the openai
# package (setup.sh installs it), else the first with pytest (the openai
# client's tests then say "skipped").
LLM_PY ?= $(shell for m in 'pytest, openai' pytest; do for p in python3 /usr/bin/python3; do \
    $$p -c "import $$m" 2>/dev/null && { echo $$p; exit 0; }; done; done)
LLM_TEST_ENV = LLM_BUILD=$(abspath $(BUILD))

test-llm: $(LLM_SERVER) $(LLM_LOADGEN) $(LLM_GEN) $(LLM_SHARD_MODULE) $(BUILD)/adag-worker
	@if [ -z "$(LLM_PY)" ]; then \
	    echo "test-llm: skipped: no python3 with pytest (./setup.sh installs it)"; exit 0; fi; \
	$(LLM_TEST_ENV) $(LLM_PY) -m pytest -p no:cacheprovider -rs -q tests/llm $(PYTEST_ARGS)

demo-llm: $(LLM_SERVER) $(LLM_GEN) $(LLM_SHARD_MODULE) $(BUILD)/adag-worker
	$(LLM_TEST_ENV) $(or $(LLM_PY),python3) examples/llm/demo.py

.PHONY: test-llm demo-llm

$(LLM_SHARD_CUDA_MODULE): examples/llm/stage_actors.c examples/llm/shard_kernels.cu $(LLM_SRCS) \
    $(wildcard examples/llm/*.h) $(ADAG_HEADERS)
	@mkdir -p $(dir $@) $(BUILD)/obj/examples/llm/cuda
	for f in stage_actors model safetensors; do \
	    $(CC) $(filter-out $(SANFLAGS),$(CFLAGS_BASE)) $(CFLAGS) -DLLM_SHARD_CUDA -c \
	        -o $(BUILD)/obj/examples/llm/cuda/$$f.o examples/llm/$$f.c || exit 1; done
	$(NVCC) $(NVCC_FLAGS) -fmad=false --cudart shared -shared -Xcompiler -fPIC -I include -I . -o $@ \
	    examples/llm/shard_kernels.cu $(BUILD)/obj/examples/llm/cuda/*.o \
	    -Xlinker -rpath,$(CUDA_HOME)/lib64 $(LLM_LIBS)

$(GPU_LLM_TEST): tests/gpu/test_llm_cuda.c $(LLM_SERVE_OBJS) $(LLM_OBJS) $(wildcard examples/llm/*.h) \
    $(BUILD)/libadag.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -I . -DADAG_TEST_BUILD_DIR='"$(abspath $(BUILD))"' $(LDFLAGS_BASE) $(LDFLAGS) \
	    -o $@ $< $(LLM_SERVE_OBJS) $(LLM_OBJS) -L$(BUILD) -ladag $(RPATH) $(LLM_LIBS) -lpthread

