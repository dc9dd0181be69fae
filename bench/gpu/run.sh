#!/usr/bin/env bash
# Run on the GPU machine, from the repository root, with .gpu/ carried (bench/gpu/prepare.sh).
# Installs the carried wheels into $SKYCONV_SITE (default /tmp/site), finds CUDA's libraries,
# then runs the steps asked for. With .gpu-cygrid/ carried too (prepare.sh --cygrid), installs
# Cygrid and its numpy<2 stack into $CYGRID_SITE (default /tmp/cygsite) and sets
# SKYCONV_BENCH_CYGRID_PYTHON to a python that puts that folder first on its path, so the
# gridding benchmark times Cygrid on this machine. Files for $OUT (at most 8 come back): info.txt,
# pytest-gpu.log, pytest-all.log, pytest.log, bench.log and <machine>.json.
#
# Usage: bash bench/gpu/run.sh STEP [STEP ...]
#   info               python, glibc, GPU, skyconv.backend_info()
#   gpu-tests          pytest -m gpu -q                        -> $OUT/pytest-gpu.log
#   all-tests          pytest -q -x                            -> $OUT/pytest-all.log
#   tests              gpu-tests, then all-tests
#   bench [PATTERN..]  python -m bench --machine $MACHINE [--cases P1,P2] $BENCH_ARGS
#                      -> bench/results/$MACHINE.json, copied to $OUT with bench.log
#   pytest ARGS..      pytest with ARGS (takes the rest of the line) -> $OUT/pytest.log
#   cmd CMD ARGS..     any command with the wheels installed (takes the rest of the line),
#                      e.g. cmd python3 bench/gpu/profile_sht.py --nside 4096
#   all                info, tests, bench (every case)
#   dask               install .gpu-dask/'s wheels (prepare.sh --dask: dask, distributed, zarr)
#                      into $SKYCONV_SITE, for the later steps (e.g. dask pytest tests/grid/
#                      test_dask_grid.py, or cmd python3 bench/dask_scfind.py --workers 16
#                      --size 8GB)
#   dask-gpu           bench/dask_gpu.py (after dask; S+C and à trous from a zarr cube on local
#                      disk, 1 GPU worker vs 2; on nvidia-h100-x2) -> $OUT/dask-gpu.log and
#                      $OUT/dask-gpu.json; DASK_GPU_ARGS adds arguments, e.g.
#                      DASK_GPU_ARGS="--size 8GB --only sc"
#   use-cuda12         later steps use CUDA 12's NVRTC and cuFFT (SKYCONV_CUDA_VERSION=12):
#                      from .gpu-cu12/ (prepare.sh --cuda12; its parts may come over several
#                      calls), else from CUDA 12 wheels or toolkits already on this machine
#   use-cuda13         later steps use CUDA 13's (SKYCONV_CUDA_VERSION=13)
#   multi-gpu-sht      bench/gpu/multi_gpu_sht.py (one SHT over GPUs 0 and 1 vs one GPU; on
#                      nvidia-h100-x2) -> $OUT/multi-gpu-sht.log; MULTI_ARGS adds arguments,
#                      e.g. MULTI_ARGS="--sizes 1024:2048 --big=" for a quick check
#   first-call         bench/gpu/first_call.py (fresh processes, cold and warm kernel cache)
#                      -> $OUT/first-call$SFX.log
#   toolkit-save       bench/gpu/toolkit_compare.py save -> /tmp/toolkit$SFX.npz
#   toolkit-compare    use-cuda13 + toolkit-save, use-cuda12 + toolkit-save, then compare the
#                      two (1e-12) -> $OUT/toolkit-compare.log
# Logs of steps run after use-cuda12/13 get the suffix -cuda12/-cuda13 ($SFX), e.g.
#   run.sh info gpu-tests use-cuda12 info gpu-tests first-call toolkit-compare
# runs the GPU suite once with each toolkit.
# A failing step does not stop later ones; the exit status is 1 if any step failed.
# Environment: BENCH_MACHINE (default from the GPU: h100, h200, ...), BENCH_ARGS (extra
# arguments for python -m bench, e.g. "--repeats 10"), PYTHON (default python3).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
PY=${PYTHON:-python3}
SITE=${SKYCONV_SITE:-/tmp/site}
OUT=${OUT:-$ROOT/.gpu/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
failed=()

usage() { sed -n '2,41p' "$0"; }

case ${1:-} in
    "") usage; exit 2 ;;
    -h|--help) usage; exit 0 ;;
esac

# ---------------------------------------------------------------- install
install() {
    shopt -s nullglob
    local wheels=(.gpu/whl/*.whl) sky=(.gpu/skyconv-*.whl)
    shopt -u nullglob
    if [[ ${#sky[@]} == 0 ]]; then
        echo "run.sh: no .gpu/skyconv-*.whl: run bench/gpu/prepare.sh and carry .gpu" >&2
        exit 2
    fi
    [[ -f .gpu/BUILD_INFO ]] && sed 's/^/build: /' .gpu/BUILD_INFO
    rm -rf "$SITE"
    if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" \
            "${wheels[@]}" "${sky[@]}"; then
        echo "run.sh: installing the wheels failed (glibc: $(ldd --version | head -1))" >&2
        exit 2
    fi
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
    install_cygrid
}

# Cygrid 2.0.4 needs numpy<2: its wheels (.gpu-cygrid/, plus the ones bench/gpu/wheels-cygrid.txt
# shares with .gpu/whl) go into a site folder of their own, and a wrapper runs $PY with only that
# folder on PYTHONPATH, where numpy 1.26 shadows the system's numpy 2.
install_cygrid() {
    local cygsite=${CYGRID_SITE:-/tmp/cygsite} wheels=() spec name f
    shopt -s nullglob
    wheels=(.gpu-cygrid/*.whl)
    if [[ ${#wheels[@]} == 0 ]]; then
        shopt -u nullglob
        return 0
    fi
    while read -r spec; do
        name=$(printf '%s' "${spec%%==*}" | tr '[:upper:]' '[:lower:]' | sed -E 's/[-_.]+/_/g')
        for f in .gpu/whl/*.whl; do
            if [[ $(basename "$f" | tr '[:upper:]' '[:lower:]') == "$name-${spec#*==}-"* ]]; then
                wheels+=("$f")
            fi
        done
    done < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' bench/gpu/wheels-cygrid.txt | grep -v '^$')
    shopt -u nullglob
    rm -rf "$cygsite"
    if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$cygsite" \
            "${wheels[@]}"; then
        echo "run.sh: installing Cygrid's wheels failed: the Cygrid anchor will be skipped" >&2
        return 0
    fi
    cat > "$cygsite.python" <<EOF
#!/usr/bin/env bash
# Python with Cygrid and numpy<2 from $cygsite first on the path (written by bench/gpu/run.sh).
export PYTHONPATH="$cygsite"
export PYTHONNOUSERSITE=1
exec "$(command -v "$PY")" "\$@"
EOF
    chmod +x "$cygsite.python"
    export SKYCONV_BENCH_CYGRID_PYTHON="$cygsite.python"
    echo "cygrid: $("$cygsite.python" -c 'import cygrid, numpy, astropy
print("cygrid", cygrid.__version__, "numpy", numpy.__version__, "astropy", astropy.__version__)' 2>&1 | tail -1)"
}

# Folders holding CUDA 13's libnvrtc and libcufft, for skyconv's loader (it also searches
# pip's nvidia/cu13/lib on sys.path, CUDA_HOME and /usr/local/cuda by itself).
cuda_dirs() {
    local dirs=() d lib found
    for lib in libnvrtc.so.13 'libcufft.so.1[0-9]'; do
        found=
        for d in /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 \
                 /usr/local/cuda*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
            # shellcheck disable=SC2086 # $lib is a glob on purpose
            if compgen -G "$d/"$lib >/dev/null; then found=$d; break; fi
        done
        if [[ -z $found ]] && command -v ldconfig >/dev/null; then
            found=$(ldconfig -p | awk -v l="${lib%%.so*}" '$1 ~ "^"l"\\.so" {print $NF; exit}')
            if [[ -n $found ]]; then found=$(dirname "$found"); fi
        fi
        if [[ -n $found ]]; then dirs+=("$found"); else echo "run.sh: $lib not found" >&2; fi
    done
    if [[ ${#dirs[@]} -gt 0 ]]; then printf '%s\n' "${dirs[@]}" | awk '!seen[$0]++' | paste -sd:; fi
}

machine_name() {
    if [[ -n ${BENCH_MACHINE:-} ]]; then echo "$BENCH_MACHINE"; return; fi
    local gpu
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
    case $gpu in
        *H200*) echo h200 ;;
        *H100*) echo h100 ;;
        *A100*) echo a100 ;;
        "") echo h100 ;;
        *) echo "$gpu" | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-' | sed 's/-$//' ;;
    esac
}

# CUDA 12's libnvrtc.so.12 (+ builtins) and libcufft.so.11: the parts of .gpu-cu12/ unpacked
# into /tmp/cu12, else pip's -cu12 wheels in this python's site-packages, else a CUDA 12 toolkit.
# Prints the folders (colon-separated).
cu12_dirs() {
    local parts=() d dirs=() sp
    shopt -s nullglob
    parts=(.gpu-cu12/cu12libs.tar.xz.part-*)
    shopt -u nullglob
    if [[ ${#parts[@]} -gt 0 ]]; then
        if [[ -f .gpu-cu12/SHA256 ]] && ! cat "${parts[@]}" | sha256sum | grep -q "$(cut -d' ' -f1 .gpu-cu12/SHA256)"; then
            echo "run.sh: .gpu-cu12 parts incomplete (${#parts[@]} here; see .gpu-cu12/PARTS)" >&2
        else
            rm -rf /tmp/cu12 && mkdir -p /tmp/cu12
            cat "${parts[@]}" | xz -d | tar -x -C /tmp/cu12
            echo "/tmp/cu12/nvidia/cuda_nvrtc/lib:/tmp/cu12/nvidia/cufft/lib"
            return 0
        fi
    fi
    while read -r sp; do
        if [[ -e $sp/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 ]]; then dirs+=("$sp/nvidia/cuda_nvrtc/lib"); fi
        if [[ -e $sp/nvidia/cufft/lib/libcufft.so.11 ]]; then dirs+=("$sp/nvidia/cufft/lib"); fi
    done < <("$PY" -c 'import sys; print("\n".join(p for p in sys.path if p))')
    for d in /usr/local/cuda-12*/lib64; do
        if [[ -e $d/libnvrtc.so.12 ]]; then dirs+=("$d"); fi
    done
    if [[ ${#dirs[@]} -gt 0 ]]; then printf '%s\n' "${dirs[@]}" | awk '!seen[$0]++' | paste -sd:; fi
}

use_cuda() {  # use_cuda 12|13
    export SKYCONV_CUDA_VERSION=$1 SFX=-cuda$1
    if [[ $1 == 12 ]]; then
        local d
        d=$(cu12_dirs)
        if [[ -z $d ]]; then
            echo "run.sh: no CUDA 12 NVRTC/cuFFT here (carry .gpu-cu12: prepare.sh --cuda12)" >&2
            return 1
        fi
        echo "CUDA 12 libraries: $d"
        SKYCONV_CUDA_LIB_DIRS="$d${BASE_LIB_DIRS:+:$BASE_LIB_DIRS}"
    else
        SKYCONV_CUDA_LIB_DIRS=$BASE_LIB_DIRS
    fi
    export SKYCONV_CUDA_LIB_DIRS
    "$PY" -c 'import skyconv, json; c = skyconv.backend_info()["cuda"]
print(json.dumps({k: c[k] for k in ("available", "reason", "driver_version", "toolkit", "nvrtc", "cufft", "rejected")}, indent=1))'
}

# The Dask wheels (.gpu-dask/, prepare.sh --dask) into the same site folder as skyconv's.
step_dask() {
    shopt -s nullglob
    local wheels=(.gpu-dask/*.whl)
    shopt -u nullglob
    if [[ ${#wheels[@]} == 0 ]]; then
        echo "run.sh: no .gpu-dask/*.whl: run bench/gpu/prepare.sh --dask and carry .gpu-dask" >&2
        return 2
    fi
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "${wheels[@]}" \
        && "$PY" -c 'import dask, distributed, zarr
print("dask", dask.__version__, "distributed", distributed.__version__, "zarr", zarr.__version__)'
}

step_first_call() {
    "$PY" bench/gpu/first_call.py --json "/tmp/first-call$SFX.json" 2>&1 | tee "$OUT/first-call$SFX.log"
    return "${PIPESTATUS[0]}"
}

step_dask_gpu() {
    # shellcheck disable=SC2086
    "$PY" bench/dask_gpu.py --json "$OUT/dask-gpu$SFX.json" ${DASK_GPU_ARGS:-} 2>&1 \
        | tee "$OUT/dask-gpu$SFX.log"
    return "${PIPESTATUS[0]}"
}

step_multi_gpu_sht() {
    # shellcheck disable=SC2086
    "$PY" bench/gpu/multi_gpu_sht.py --json /tmp/multi-gpu-sht.json ${MULTI_ARGS:-} 2>&1 \
        | tee "$OUT/multi-gpu-sht.log"
    return "${PIPESTATUS[0]}"
}

step_toolkit_save() {
    "$PY" bench/gpu/toolkit_compare.py save "/tmp/toolkit$SFX.npz"
}

step_toolkit_compare() {
    {
        use_cuda 13 && step_toolkit_save
        use_cuda 12 && step_toolkit_save
        "$PY" bench/gpu/toolkit_compare.py compare /tmp/toolkit-cuda13.npz /tmp/toolkit-cuda12.npz
    } 2>&1 | tee "$OUT/toolkit-compare.log"
    return "${PIPESTATUS[0]}"
}

# ---------------------------------------------------------------- steps
step_info() {
    {
        echo "python: $("$PY" --version 2>&1)   glibc: $(ldd --version | head -1)"
        echo "SKYCONV_CUDA_LIB_DIRS=${SKYCONV_CUDA_LIB_DIRS:-}"
        echo "SKYCONV_BENCH_CYGRID_PYTHON=${SKYCONV_BENCH_CYGRID_PYTHON:-}"
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
        "$PY" -c 'import skyconv, json; print(json.dumps(skyconv.backend_info(), indent=1))'
    } 2>&1 | tee "$OUT/info${SFX}.txt"
    return "${PIPESTATUS[0]}"
}

# run_pytest LOG ARGS...: pytest teed into $OUT/LOG; status of pytest.
run_pytest() {
    local log=$1
    shift
    echo "== pytest $*"
    "$PY" -m pytest "$@" 2>&1 | tee "$OUT/$log"
    local rc=${PIPESTATUS[0]}
    # 5: no test was collected (e.g. no gpu-marked test yet): not a failure here
    if [[ $rc == 5 ]]; then return 0; fi
    return "$rc"
}

step_bench() {
    local machine cases=() args=()
    machine=$(machine_name)
    if [[ $# -gt 0 ]]; then cases=(--cases "$(IFS=,; echo "$*")"); fi
    # shellcheck disable=SC2206 # BENCH_ARGS is split on purpose
    args=(${BENCH_ARGS:-})
    echo "== python -m bench --machine $machine ${cases[*]} ${args[*]}"
    "$PY" -m bench --machine "$machine" "${cases[@]}" "${args[@]}" 2>&1 | tee "$OUT/bench.log"
    local rc=${PIPESTATUS[0]}
    cp -f "bench/results/$machine.json" "$OUT/" 2>/dev/null || true
    return "$rc"
}

run() {  # run NAME CMD...: record NAME as failed when CMD fails
    local name=$1
    shift
    if ! "$@"; then failed+=("$name"); fi
}

install
SKYCONV_CUDA_LIB_DIRS=$( (cuda_dirs; echo "${SKYCONV_CUDA_LIB_DIRS:-}") | paste -sd: | sed 's/^://; s/:$//')
export SKYCONV_CUDA_LIB_DIRS
BASE_LIB_DIRS=$SKYCONV_CUDA_LIB_DIRS
SFX=${SFX:-}

while [[ $# -gt 0 ]]; do
    step=$1
    shift
    case $step in
        info) run info step_info ;;
        gpu-tests) run "gpu-tests$SFX" run_pytest "pytest-gpu$SFX.log" -m gpu -q ;;
        use-cuda12) run use-cuda12 use_cuda 12 ;;
        use-cuda13) run use-cuda13 use_cuda 13 ;;
        first-call) run "first-call$SFX" step_first_call ;;
        multi-gpu-sht) run multi-gpu-sht step_multi_gpu_sht ;;
        dask) run dask step_dask ;;
        dask-gpu) run "dask-gpu$SFX" step_dask_gpu ;;
        toolkit-save) run "toolkit-save$SFX" step_toolkit_save ;;
        toolkit-compare) run toolkit-compare step_toolkit_compare ;;
        all-tests) run all-tests run_pytest pytest-all.log -q -x ;;
        tests)
            run gpu-tests run_pytest pytest-gpu.log -m gpu -q
            run all-tests run_pytest pytest-all.log -q -x ;;
        pytest) run pytest run_pytest pytest.log "$@"; set -- ;;
        cmd) run cmd "$@"; set -- ;;
        bench)
            pats=()
            while [[ $# -gt 0 && ! $1 =~ ^(info|gpu-tests|all-tests|tests|pytest|bench|all|dask|dask-gpu|use-cuda12|use-cuda13|first-call|multi-gpu-sht|toolkit-save|toolkit-compare)$ ]]; do
                pats+=("$1")
                shift
            done
            run bench step_bench "${pats[@]}" ;;
        all)
            run info step_info
            run gpu-tests run_pytest pytest-gpu.log -m gpu -q
            run all-tests run_pytest pytest-all.log -q -x
            run bench step_bench ;;
        -h|--help) usage; exit 0 ;;
        *) echo "run.sh: unknown step $step" >&2; usage; exit 2 ;;
    esac
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "run.sh: failed: ${failed[*]}"
    exit 1
fi
echo "run.sh: all steps passed"
