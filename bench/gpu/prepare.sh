#!/usr/bin/env bash
# Prepare .gpu/ (git-ignored) for a run on the GPU machine, which has no network and no Rust:
#   .gpu/skyconv-*.whl   the abi3 wheel, built here with `maturin build --release`
#   .gpu/whl/*.whl       the wheels it lacks, for CPython 3.12 manylinux x86-64
#                        (bench/gpu/wheels-core.txt, plus wheels-notebooks.txt with --notebooks
#                        and wheels-dask.txt with --dask: dask, distributed and their deps)
#   .gpu/BUILD_INFO      commit and date of the build (recorded by the benchmark)
#   .gpu-cygrid/*.whl    with --cygrid: Cygrid 2.0.4 and its numpy<2 stack
#                        (bench/gpu/wheels-cygrid.txt, less the wheels .gpu/whl already has),
#                        for the gridding benchmark's anchor; carry it beside .gpu
#   .gpu-cu12/           with --cuda12: CUDA 12's libnvrtc.so.12 (+ builtins) and libcufft.so.11
#                        from the nvidia-cuda-nvrtc-cu12 / nvidia-cufft-cu12 wheels (90 + 200
#                        MB: neither wheel fits one device call), xz-packed and split into
#                        parts of at most 60 MiB (cu12libs.tar.xz.part-aa, -ab, ...), with
#                        SHA256 of the whole and PARTS, the carry plan. run.sh use-cuda12
#                        unpacks them once every part is on the machine: carry one part a call
#                        (the machine keeps what earlier calls carried while it stays warm).
# Then carry .gpu (and .gpu-cygrid) to the GPU machine and run `bash bench/gpu/run.sh all`
# there (bench/README.md). One device call carries at most 64 MiB: --skip NAME[,NAME...]
# leaves wheels out of .gpu/whl (e.g. --skip ducc0 for a gridding run with .gpu-cygrid).
#
# Usage: bash bench/gpu/prepare.sh [--notebooks] [--dask] [--cygrid] [--cuda12] [--skip NAMES]
#                                  [--no-build] [--no-download]
# Environment: PYTHON (default python3, with maturin and pip), GPU_PY (default 3.12).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
GPU_PY=${GPU_PY:-3.12}
LIMIT_MIB=60

build=1 download=1 notebooks=0 dask=0 cygrid=0 cuda12=0 skip=""
CUDA12_WHEELS=(nvidia-cuda-nvrtc-cu12==12.9.86 nvidia-cufft-cu12==11.4.1.4)
while [[ $# -gt 0 ]]; do
    case $1 in
        --notebooks) notebooks=1 ;;
        --dask) dask=1 ;;
        --cygrid) cygrid=1 ;;
        --cuda12) cuda12=1 ;;
        --skip) skip=${2:?--skip needs NAME[,NAME...]}; shift ;;
        --no-build) build=0 ;;
        --no-download) download=0 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "prepare.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

mkdir -p .gpu/whl

# NAME==VERSION lines of wheel lists.
specs_of() {
    sed -e 's/#.*//' -e 's/[[:space:]]//g' "$@" | grep -v '^$'
}

# Normalised distribution name: lower case, runs of -_. as one _.
norm() {
    printf '%s' "$1" | tr '[:upper:]' '[:lower:]' | sed -E 's/[-_.]+/_/g'
}

# NAME==VERSION lines of the core wheel lists in use, less --skip.
wanted() {
    local lists=(bench/gpu/wheels-core.txt) s skipped
    if [[ $notebooks == 1 ]]; then lists+=(bench/gpu/wheels-notebooks.txt); fi
    if [[ $dask == 1 ]]; then lists+=(bench/gpu/wheels-dask.txt); fi
    specs_of "${lists[@]}" | while read -r s; do
        skipped=0
        for k in ${skip//,/ }; do
            if [[ $(norm "${s%%==*}") == "$(norm "$k")" ]]; then skipped=1; fi
        done
        if [[ $skipped == 0 ]]; then echo "$s"; fi
    done
}

# Wheel file-name prefix of NAME==VERSION: lower case, runs of -_. as one _.
prefix() {
    local name=${1%%==*} version=${1#*==}
    printf '%s-%s-' "$(norm "$name")" "$version"
}

# Download the wheels SPECS... into DIR for the GPU machine, after removing DIR's wheels that
# are no longer listed (an old pin would install beside the new one).
fetch_wheels() {
    local dir=$1 f base keep s
    shift
    mkdir -p "$dir"
    shopt -s nullglob
    for f in "$dir"/*.whl; do
        base=$(basename "$f" | tr '[:upper:]' '[:lower:]')
        keep=0
        for s in "$@"; do
            if [[ $base == "$(prefix "$s")"* ]]; then keep=1; break; fi
        done
        if [[ $keep == 0 ]]; then echo "removing stale $f"; rm -f "$f"; fi
    done
    shopt -u nullglob
    if [[ $# -gt 0 ]]; then
        "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$GPU_PY" \
            --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 -d "$dir" "$@"
    fi
}

if [[ $build == 1 ]]; then
    echo "== building the skyconv wheel"
    rm -f .gpu/skyconv-*.whl
    if command -v maturin >/dev/null; then MATURIN=(maturin); else MATURIN=("$PY" -m maturin); fi
    "${MATURIN[@]}" build --release --out .gpu
    commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
    if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then commit+=-dirty; fi
    {
        echo "commit=$commit"
        echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "wheel=$(basename .gpu/skyconv-*.whl)"
    } > .gpu/BUILD_INFO
fi

if [[ $download == 1 ]]; then
    echo "== downloading wheels for CPython $GPU_PY"
    mapfile -t specs < <(wanted)
    fetch_wheels .gpu/whl "${specs[@]}"
    if [[ $cygrid == 1 ]]; then
        echo "== downloading Cygrid's wheels into .gpu-cygrid/"
        cyg=()
        while read -r s; do
            shared=0
            for c in "${specs[@]}"; do
                if [[ $(prefix "$s") == "$(prefix "$c")" ]]; then shared=1; fi
            done
            if [[ $shared == 0 ]]; then cyg+=("$s"); fi
        done < <(specs_of bench/gpu/wheels-cygrid.txt)
        fetch_wheels .gpu-cygrid "${cyg[@]}"
    fi
fi

if [[ $cuda12 == 1 ]]; then
    echo "== packing CUDA 12's NVRTC and cuFFT into .gpu-cu12/ (xz: minutes)"
    src=.whl/cu12
    mkdir -p "$src"
    if [[ $download == 1 ]]; then
        "$PY" -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
            --platform manylinux_2_17_x86_64 --platform manylinux_2_12_x86_64 \
            --python-version "$GPU_PY" --implementation cp -d "$src" "${CUDA12_WHEELS[@]}"
    fi
    stage=$(mktemp -d)
    for w in "$src"/nvidia_cuda_nvrtc_cu12-*.whl; do
        unzip -q -o "$w" 'nvidia/cuda_nvrtc/lib/libnvrtc.so.12' \
            'nvidia/cuda_nvrtc/lib/libnvrtc-builtins.so.12.*' -x '*alt*' -d "$stage"
    done
    for w in "$src"/nvidia_cufft_cu12-*.whl; do
        unzip -q -o "$w" 'nvidia/cufft/lib/libcufft.so.11' -d "$stage"
    done
    rm -rf .gpu-cu12 && mkdir -p .gpu-cu12
    tar -C "$stage" -cf - nvidia | xz -6 -T0 | split -b "${LIMIT_MIB}M" - .gpu-cu12/cu12libs.tar.xz.part-
    rm -rf "$stage"
    cat .gpu-cu12/cu12libs.tar.xz.part-* | sha256sum > .gpu-cu12/SHA256
    {
        echo "Carry one part a device call (each <= $LIMIT_MIB MiB), in any order, e.g."
        for f in .gpu-cu12/cu12libs.tar.xz.part-*; do
            echo "  carry [\"$f\", \".gpu-cu12/SHA256\"]  command: true"
        done
        echo "then: bash bench/gpu/run.sh info gpu-tests use-cuda12 info gpu-tests"
    } > .gpu-cu12/PARTS
    ls -l .gpu-cu12
    cat .gpu-cu12/PARTS
fi

echo "== .gpu/"
ls -l .gpu .gpu/whl
dirs=(.gpu)
if [[ $cygrid == 1 ]]; then
    ls -l .gpu-cygrid
    dirs+=(.gpu-cygrid)
fi
size_kib=$(du -skc "${dirs[@]}" | tail -1 | cut -f1)
echo "${dirs[*]} hold $((size_kib / 1024)) MiB ($size_kib KiB; limit $LIMIT_MIB MiB)"
if (( size_kib > LIMIT_MIB * 1024 )); then
    echo "prepare.sh: ${dirs[*]} are over $LIMIT_MIB MiB: trim bench/gpu/wheels-*.txt or" \
        "leave wheels out with --skip (e.g. --skip ducc0)" >&2
    exit 1
fi
