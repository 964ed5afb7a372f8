#!/usr/bin/env bash
# Runs the GPU test programs of a build (default: build), each under a hard
# limit, as `make test-gpu` does (tests/gpu/README.md): test-cuda,
# test-cuda-dag, then test-llm-cuda. Each exits 0 (none failed, one passed at least), 77 (every
# test skipped, "skipped: <reason>" per test) or 1 (one failed). A program
# that skipped everything is SKIPPED, never passed; with TEST_GPU_REQUIRE
# set (a runner that has a GPU) that is a failure. Used by the Makefile and
# by run-on-gpu-host.sh on a machine that got the programs in a bundle
# (bundle.sh) and cannot build them.
set -u
build=${1:-build}
passed=0 skipped=0 failed=0
for run in "$build/tests/gpu/test-cuda:300" "$build/tests/gpu/test-cuda-dag:1200" \
    "$build/tests/gpu/test-llm-cuda:300"; do
    prog=${run%:*} limit=${run##*:} name=$(basename "${run%:*}") rc=0 t0=$SECONDS
    timeout --kill-after=10 "$limit" "$prog" || rc=$?
    case $rc in
    0) passed=$((passed + 1)); result=passed; echo "test-gpu: $name: passed" ;;
    77) skipped=$((skipped + 1)); result=SKIPPED
        echo "test-gpu: $name: SKIPPED, not passed (the reason is above)" ;;
    *) failed=$((failed + 1)); result="FAILED (exit $rc)"; echo "test-gpu: $name: FAILED (exit $rc)" >&2 ;;
    esac
    # GPU_SUMMARY (run-on-gpu-host.sh): one line per program for its table
    [ -z "${GPU_SUMMARY:-}" ] || printf 'test-gpu\t%s\t%s\t%s\n' "$name" "$result" \
        $((SECONDS - t0)) >>"$GPU_SUMMARY"
done
if [ $failed -ne 0 ]; then
    echo "test-gpu: FAILED ($failed failed, $passed passed, $skipped skipped)" >&2
    exit 1
elif [ $skipped -ne 0 ]; then
    echo "test-gpu: SKIPPED, not passed: $skipped of $((passed + skipped)) programs ran no test" \
        "(no CUDA device here: the reason is above)"
    if [ -n "${TEST_GPU_REQUIRE:-}" ]; then
        echo "test-gpu: TEST_GPU_REQUIRE is set: failing" >&2
        exit 1
    fi
else
    echo "test-gpu: passed ($passed programs)"
fi
