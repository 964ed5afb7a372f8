# The stress programs (tests/stress_*.c) and `make test-tsan`, included by
# the Makefile (which defines BUILD, CC, the flags and the libraries).

$(BUILD)/tests/stress-ring: $(BUILD)/obj/tests/stress_ring.o $(BUILD)/libadag.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LIBS)

# tests/stress_dag.c: whole DAGs of thread actors, several drivers at once;
# tests/stress_device.c: the emulated device's streams and events;
# tests/stress_values.c: its value ops.
$(BUILD)/tests/stress-dag $(BUILD)/tests/stress-device $(BUILD)/tests/stress-values: \
    $(BUILD)/tests/stress-%: $(BUILD)/obj/tests/stress_%.o $(BUILD)/libadag.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LIBS)

# tests/stress_device_dag.c: device channels between thread actors on emu
$(BUILD)/tests/stress-device-dag: $(BUILD)/obj/tests/stress_device_dag.o \
    $(BUILD)/obj/tests/modules/gpu_stage.o $(BUILD)/libadag.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LIBS)

# tests/stress_execute_copy.c: execute's split copy of large inputs into
# the ring (the runtime's copy pool) while actors on emu read earlier slots
$(BUILD)/tests/stress-execute-copy: $(BUILD)/obj/tests/stress_execute_copy.o \
    $(BUILD)/obj/tests/modules/gpu_stage.o $(BUILD)/libadag.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LIBS)

# tests/stress_comm.c: the host communicator (ranks in threads, many
# messages, an abort mid-stream) under ThreadSanitizer.
$(BUILD)/tests/stress-comm: $(BUILD)/obj/tests/stress_comm.o $(BUILD)/libadag.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LIBS)

# tests/stress_data.c: the data source's threads, budget and consumer under
# ThreadSanitizer (the static libadag-data.a and libadag.a).
$(BUILD)/tests/stress-data: $(BUILD)/obj/tests/stress_data.o $(DATA_STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LIBS) $(DATA_LIBS)

# tests/stress_trace.c: trace rings written and copied at once, and a traced
# DAG whose trace is written while it runs, under ThreadSanitizer.
$(BUILD)/tests/stress-trace: $(BUILD)/obj/tests/stress_trace.o $(BUILD)/libadag.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LIBS)

# The channel and communicator stress tests under ThreadSanitizer (Criterion
# cannot run under TSan, so these are plain programs; they fail on any
# reported race).
# UCX's memory hooks (libucm, loaded with libadag, patches mmap/malloc) crash
# under TSan's interceptors: off for these runs (they serve RDMA registration
# caches only).
STRESS_PROGRAMS := stress-ring stress-dag stress-device stress-device-dag stress-comm \
    stress-data stress-trace stress-values stress-execute-copy
test-tsan:
	$(MAKE) SAN=thread $(addprefix build/san-thread/tests/,$(STRESS_PROGRAMS))
	@set -e; for p in $(STRESS_PROGRAMS); do \
	    echo "test-tsan: $$p"; \
	    UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none \
	        TSAN_OPTIONS=halt_on_error=1:exitcode=66 build/san-thread/tests/$$p; \
	done
