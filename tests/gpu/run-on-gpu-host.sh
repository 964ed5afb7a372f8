#!/usr/bin/env bash
# The GPU checks on a machine that has a CUDA device (tests/gpu/README.md,
# "On a GPU machine"): builds what they need there, then runs
#   make test-gpu TEST_GPU_REQUIRE=1, examples/gpu_pipeline and tp_pp on
#   cuda, adag-bench's device rows and the NCCL allreduce rows,
#   and the unit suites that take a cuda parameter (device, comm, comm_coll,
#   ...) when UNIT_TESTS names a build of build/tests/adag-unit-tests (with
#   LD_LIBRARY_PATH set for its Criterion if that machine has none).
# Where the toolkit has no NCCL, the one of a pip wheel (nvidia-nccl-cu13,
# as PyTorch installs it) is used: its nccl.h for the build, its library by
# ADAG_NCCL_PATH. Steps: build test-gpu examples bench unit (default: all).
# Ends with one table: every check with its result and seconds, then the
# bench rows (adag against the raw mechanism of the same run).
#
# BUNDLE=FILE (made by tests/gpu/bundle.sh where adag builds): the build
# step unpacks it instead of building (a GPU image without the -dev
# packages), its libraries go on LD_LIBRARY_PATH, the build's absolute path
# is linked here when it is free, test-gpu runs tests/gpu/run-tests.sh
# rather than make, and unit uses the bundle's adag-unit-tests.
set -u
cd "$(dirname "$0")/../.."
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
steps=${*:-build test-gpu examples bench unit}
nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
if [ -n "${BUNDLE:-}" ]; then
    export LD_LIBRARY_PATH="$PWD/build/bundle-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    UNIT_TESTS=${UNIT_TESTS:-build/tests/adag-unit-tests}
fi
if [ ! -f "$CUDA_HOME/include/nccl.h" ] || [ -z "${ADAG_NCCL_PATH:-}" ]; then
    wheel=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null)
    if [ -n "$wheel" ] && [ ! -f "$CUDA_HOME/include/nccl.h" ] && [ -z "${BUNDLE:-}" ]; then
        cp "$wheel"/include/nccl*.h "$CUDA_HOME/include/" || echo "cannot copy nccl.h into $CUDA_HOME"
    fi
    if [ -n "$wheel" ] && ! ls "$CUDA_HOME"/lib64/libnccl.so.2 >/dev/null 2>&1; then
        export ADAG_NCCL_PATH="$wheel/lib/libnccl.so.2"
    fi
fi
failed=0
# one line per check (step, check, result, seconds) for the table at the end
export GPU_SUMMARY=$PWD/build/gpu-summary.tsv
mkdir -p build && : >"$GPU_SUMMARY"
rm -f build/gpu-bench-*.json
began=$SECONDS
# record STEP CHECK RC SECONDS: 0 passed, 77 SKIPPED, else FAILED (and the run fails)
record() {
    local result
    case $3 in 0) result=passed ;; 77) result=SKIPPED ;; *) result="FAILED (exit $3)"; failed=1 ;; esac
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$result" "$4" >>"$GPU_SUMMARY"
}
# check STEP NAME LIMIT CMD...: runs CMD under LIMIT seconds and records it
check() {
    local step=$1 name=$2 limit=$3 t0=$SECONDS rc=0
    shift 3
    timeout --kill-after=10 "$limit" "$@" || rc=$?
    record "$step" "$name" $rc $((SECONDS - t0))
}
# bench ROW: its human table, and its --json rows for the table at the end
bench() {
    local t0=$SECONDS rc=0
    timeout --kill-after=10 120 build/adag-bench --only "$1" --json >"build/gpu-bench-$1.json" || rc=$?
    record bench "$1" $rc $((SECONDS - t0))
}
for step in $steps; do
    echo "==== $step ($(date +%T))"
    case $step in
    build)
        if [ -n "${BUNDLE:-}" ]; then
            rm -rf build.unpack && mkdir build.unpack && tar xzf "$BUNDLE" -C build.unpack &&
                rm -rf build && mv build.unpack/build build &&
                mv build.unpack/lib build/bundle-lib || { echo "cannot unpack $BUNDLE"; exit 1; }
            root=$(cat build.unpack/build-root)
            rm -rf build.unpack
            if [ "$root" != "$PWD" ] && [ ! -e "$root" ]; then
                mkdir -p "$(dirname "$root")" && ln -s "$PWD" "$root"
            fi
            [ "$root" -ef "$PWD" ] || echo "warning: the bundle was built in $root, which is not here:" \
                "its programs will not find their modules"
            missing=$(ldd build/adag-worker build/tests/gpu/test-cuda-dag 2>&1 | grep "not found")
            [ -z "$missing" ] || { echo "the bundle's libraries do not load here: $missing"; exit 1; }
            continue
        fi
        # only what the GPU checks need: the test suites' Criterion may be missing
        mkdir -p build && make -j"$(nproc)" build/libadag.so build/adag-worker build/adag-bench \
            build/bench/libbench_actors.so build/tests/gpu/test-cuda build/tests/gpu/test-cuda-dag \
            build/tests/gpu/libcuda_stage.so build/tests/gpu/libscale.so \
            build/examples/gpu_pipeline build/examples/tp_pp build/examples/libgpu_stages.so \
            build/examples/libgpu_stages_cuda.so build/examples/libtp_mlp.so \
            build/examples/libtp_mlp_cuda.so >build/gpu-build.log 2>&1 ||
            { tail -40 build/gpu-build.log; exit 1; } ;;
    test-gpu)
        # run-tests.sh records each program (GPU_SUMMARY)
        if [ -n "${BUNDLE:-}" ]; then
            TEST_GPU_REQUIRE=1 timeout 420 tests/gpu/run-tests.sh build || failed=1
        else
            timeout 420 make test-gpu TEST_GPU_REQUIRE=1 || failed=1
        fi ;;
    examples)
        check examples gpu_pipeline 60 build/examples/gpu_pipeline --device cuda
        # traced: every span checked (device copies inside their waits/publishes)
        check examples "gpu_pipeline traced" 60 bash -c "build/examples/gpu_pipeline --device cuda \
            --iters 2000 --trace build/gpu_pipeline_trace.json --stats --dot /dev/null &&
            python3 tests/trace_check.py build/gpu_pipeline_trace.json 4 forward backend"
        # needs 2 GPUs (a shard per device): says so on one
        timeout 60 build/examples/tp_pp --device cuda --dot /dev/null ;;
    bench)
        for row in device-hop device-bandwidth graph allreduce-nccl-dag tracing; do
            bench "$row"
        done ;;
    unit)
        if [ -z "${UNIT_TESTS:-}" ]; then echo "UNIT_TESTS not set: skipped"; continue; fi
        for suite in device device_cuda device_values device_graph device_alias actor_device \
            dev_faults overlap chan_comm comm comm_coll; do
            echo "== $suite"
            t0=$SECONDS
            timeout 120 "$UNIT_TESTS" --filter "$suite/*" --jobs 4 --verbose 2>&1 |
                grep -v "Test is disabled" |
                grep -E '^\[SKIP\]|^\[FAIL\]|Assert|Synthesis|^\[----\]   '
            record unit "$suite" "${PIPESTATUS[0]}" $((SECONDS - t0))
        done ;;
    *) echo "unknown step $step"; failed=1 ;;
    esac
done
echo "==== summary ($((SECONDS - began)) s in all)"
python3 tests/gpu/summary.py "$GPU_SUMMARY" build/gpu-bench-*.json || cat "$GPU_SUMMARY"
exit $failed
