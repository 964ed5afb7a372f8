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
        if [ -n "${BUNDLE:-}" ]; then
            TEST_GPU_REQUIRE=1 timeout 900 tests/gpu/run-tests.sh build || failed=1
        else
            timeout 900 make test-gpu TEST_GPU_REQUIRE=1 || failed=1
        fi ;;
    examples)
        timeout 120 build/examples/gpu_pipeline --device cuda || failed=1
        # traced: every span checked (device copies inside their waits/publishes)
        timeout 120 build/examples/gpu_pipeline --device cuda --iters 2000 \
            --trace build/gpu_pipeline_trace.json --stats --dot /dev/null &&
            python3 tests/trace_check.py build/gpu_pipeline_trace.json 4 forward backend || failed=1
        # needs 2 GPUs (a shard per device): says so on one
        timeout 120 build/examples/tp_pp --device cuda --dot /dev/null ;;
    bench)
        timeout 120 build/adag-bench --only device-hop
        timeout 120 build/adag-bench --only device-bandwidth
        timeout 120 build/adag-bench --only allreduce-nccl-dag
        timeout 120 build/adag-bench --only tracing ;;
    unit)
        if [ -z "${UNIT_TESTS:-}" ]; then echo "UNIT_TESTS not set: skipped"; continue; fi
        for suite in device device_cuda actor_device dev_faults overlap chan_comm comm comm_coll; do
            echo "== $suite"
            timeout 300 "$UNIT_TESTS" --filter "$suite/*" --jobs 4 --verbose 2>&1 |
                grep -v "Test is disabled" |
                grep -E '^\[SKIP\]|^\[FAIL\]|Assert|Synthesis|^\[----\]   '
            [ "${PIPESTATUS[0]}" -eq 0 ] || failed=1
        done ;;
    *) echo "unknown step $step"; failed=1 ;;
    esac
done
exit $failed
