#!/usr/bin/env bash
# Packs what the GPU checks need into one file, for a GPU machine that
# cannot build adag (its image lacks the -dev packages: libarchive, curl,
# xxhash, hwloc, ...): tests/gpu/README.md, "On a GPU machine".
#
#   tests/gpu/bundle.sh [OUT.tgz]        (default build/gpu-bundle.tgz)
#
# Builds the GPU programs, examples, bench and unit tests here, then packs
# them (debug info stripped) with the shared libraries they load that are
# neither the C library's nor CUDA's (ldd; UCX's transport modules too) and
# the build's absolute path: the programs name their modules by it.
# Unpack with BUNDLE=OUT.tgz tests/gpu/run-on-gpu-host.sh, on a machine of
# the same architecture and a C library at least as new as this one's.
set -eu
cd "$(dirname "$0")/../.."
out=${1:-build/gpu-bundle.tgz}
targets="build/libadag.so build/adag-worker build/adag-bench build/adag-info
    build/bench/libbench_actors.so build/tests/gpu/test-cuda build/tests/gpu/test-cuda-dag
    build/tests/gpu/libcuda_stage.so build/tests/gpu/libcuda_stage_emulated.so
    build/tests/gpu/libscale.so build/examples/gpu_pipeline build/examples/tp_pp
    build/examples/libgpu_stages.so build/examples/libgpu_stages_cuda.so
    build/examples/libtp_mlp.so build/examples/libtp_mlp_cuda.so build/tests/adag-unit-tests
    build/tests/gpu/test-llm-cuda build/examples/llm/libllm_shard_cuda.so build/examples/llm/libllm_shard.so"
# shellcheck disable=SC2086
make -j"$(nproc)" $targets >/dev/null
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib"
# the library's versioned names, whatever the version (make's VERSION)
for t in $targets build/libadag.so.0 build/libadag.so.0.*.* build/tests/modules; do
    cp -a --parents "$t" "$stage/"
done
find "$stage/build" -type f | while read -r f; do
    if file -b "$f" | grep -q '^ELF'; then strip --strip-debug "$f"; fi
done
# the libraries they load, but the C library's, the compiler runtime's,
# CUDA's and adag's own (those are on the GPU machine, or in the bundle)
skip='/(ld-linux[^/]*|lib(c|m|dl|pthread|rt|resolv|gcc_s|stdc\+\+|cuda|cudart|nccl|adag))\.so'
find "$stage/build" -type f -name '*' | while read -r f; do
    if file -b "$f" | grep -q '^ELF'; then ldd "$f" 2>/dev/null; fi
done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | grep -Ev "$skip" |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
ucs=$(ls "$stage"/lib/libucs.so.* 2>/dev/null | head -1)
if [ -n "$ucs" ]; then
    mods=$(dirname "$(ldd build/libadag.so | awk '/libucs/ {print $3}')")/ucx
    mkdir -p "$stage/lib/ucx"
    cp -L "$mods"/*.so.0 "$stage/lib/ucx/"
fi
pwd >"$stage/build-root"
mkdir -p "$(dirname "$out")"
tar czf "$out" -C "$stage" .
echo "bundle.sh: $out ($(du -h "$out" | cut -f1)): $(find "$stage/build" -type f | wc -l) build files," \
    "$(find "$stage/lib" -type f | wc -l) libraries; built in $(cat "$stage/build-root")"
