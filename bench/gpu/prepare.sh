#!/usr/bin/env bash
# Prepare .gpu/ (git-ignored) for a run on the GPU machine, which has no network and no Rust:
#   .gpu/skyconv-*.whl   the abi3 wheel, built here with `maturin build --release`
#   .gpu/whl/*.whl       the wheels it lacks, for CPython 3.12 manylinux x86-64
#                        (bench/gpu/wheels-core.txt, plus wheels-notebooks.txt with --notebooks)
#   .gpu/BUILD_INFO      commit and date of the build (recorded by the benchmark)
# Then carry .gpu to the GPU machine and run `bash bench/gpu/run.sh all` there (bench/README.md).
#
# Usage: bash bench/gpu/prepare.sh [--notebooks] [--no-build] [--no-download]
# Environment: PYTHON (default python3, with maturin and pip), GPU_PY (default 3.12).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
GPU_PY=${GPU_PY:-3.12}
LIMIT_MIB=60

build=1 download=1 notebooks=0
for arg in "$@"; do
    case $arg in
        --notebooks) notebooks=1 ;;
        --no-build) build=0 ;;
        --no-download) download=0 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "prepare.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done

mkdir -p .gpu/whl

# NAME==VERSION lines of the wheel lists in use.
wanted() {
    local lists=(bench/gpu/wheels-core.txt)
    if [[ $notebooks == 1 ]]; then lists+=(bench/gpu/wheels-notebooks.txt); fi
    sed -e 's/#.*//' -e 's/[[:space:]]//g' "${lists[@]}" | grep -v '^$'
}

# Wheel file-name prefix of NAME==VERSION: lower case, runs of -_. as one _.
prefix() {
    local name=${1%%==*} version=${1#*==}
    printf '%s-%s-' "$(printf '%s' "$name" | tr '[:upper:]' '[:lower:]' | sed -E 's/[-_.]+/_/g')" "$version"
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
    # Drop wheels no longer listed (an old pin would install beside the new one).
    shopt -s nullglob
    for f in .gpu/whl/*.whl; do
        base=$(basename "$f" | tr '[:upper:]' '[:lower:]')
        keep=0
        for s in "${specs[@]}"; do
            if [[ $base == "$(prefix "$s")"* ]]; then keep=1; break; fi
        done
        if [[ $keep == 0 ]]; then echo "removing stale $f"; rm -f "$f"; fi
    done
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$GPU_PY" \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .gpu/whl "${specs[@]}"
fi

echo "== .gpu/"
ls -l .gpu .gpu/whl
size_kib=$(du -sk .gpu | cut -f1)
echo ".gpu/ holds $((size_kib / 1024)) MiB ($size_kib KiB; limit $LIMIT_MIB MiB)"
if (( size_kib > LIMIT_MIB * 1024 )); then
    echo "prepare.sh: .gpu/ is over $LIMIT_MIB MiB: trim bench/gpu/wheels-*.txt" >&2
    exit 1
fi
