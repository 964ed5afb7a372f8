#!/usr/bin/env bash
# Installs what adag needs to build and test on Debian 12 (only what is missing).
set -euo pipefail
# openmpi-*: the baseline of adag-bench's allreduce rows (bench/peers/mpi_allreduce.c)
# libucx-dev: the ucx channel (transport/chan_ucx.c); ucx-utils: ucx_perftest, the
#   baseline of adag-bench's multi-host rows
# libpmix-dev: workers launched by mpirun/srun find their driver through PMIx
# iproute2: the multi-host tests build hosts out of network namespaces (ip netns)
# libarchive-dev: the data stage reads WebDataset .tar shards with libarchive
# libturbojpeg0-dev: the data stage decodes JPEGs with libjpeg-turbo
# libcurl4-openssl-dev, libxxhash-dev: it fetches http(s) shards into a disk cache
#   whose entries carry XXH3 checksums
# libhwloc-dev, libhwloc-plugins (PCI discovery), libibverbs-dev: the topology map
#   that places actors next to their GPU and NIC
# python3-matplotlib: bench/plot.py draws adag-bench's figures (make plots, make check)
# python3-dev, python3-setuptools, python3-numpy, python3-pytest: the Python package
#   (python/) built and tested by make test-python
# libjansson-dev: the LLM example (examples/llm/) reads and writes the JSON header of
#   its .safetensors weights with jansson
# libmicrohttpd-dev: its HTTP server (llm-server, examples/llm/server*.c)
# python3-pip: installs the openai package below
pkgs=(build-essential pkg-config libcriterion-dev python3 clang openmpi-bin libopenmpi-dev
      libucx-dev ucx-utils libpmix-dev iproute2 libarchive-dev libturbojpeg0-dev
      libcurl4-openssl-dev libxxhash-dev libhwloc-dev libhwloc-plugins libibverbs-dev
      python3-matplotlib python3-dev python3-setuptools python3-numpy python3-pytest
      libjansson-dev libmicrohttpd-dev python3-pip)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq "${missing[@]}"
fi
# openai (pip, not packaged by Debian 12): make test-llm drives llm-server with the
# openai client, in the python3 first on PATH (the one examples/llm/llm.mk picks)
if ! python3 -c 'import openai' 2>/dev/null; then
    python3 -m pip install -q openai 2>/dev/null ||
        python3 -m pip install -q --break-system-packages openai # Debian's own python3 (PEP 668)
fi
