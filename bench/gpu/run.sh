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

usage() { sed -n '2,20p' "$0"; }

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

# ---------------------------------------------------------------- steps
step_info() {
    {
        echo "python: $("$PY" --version 2>&1)   glibc: $(ldd --version | head -1)"
        echo "SKYCONV_CUDA_LIB_DIRS=${SKYCONV_CUDA_LIB_DIRS:-}"
        echo "SKYCONV_BENCH_CYGRID_PYTHON=${SKYCONV_BENCH_CYGRID_PYTHON:-}"
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
        "$PY" -c 'import skyconv, json; print(json.dumps(skyconv.backend_info(), indent=1))'
    } 2>&1 | tee "$OUT/info.txt"
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

while [[ $# -gt 0 ]]; do
    step=$1
    shift
    case $step in
        info) run info step_info ;;
        gpu-tests) run gpu-tests run_pytest pytest-gpu.log -m gpu -q ;;
        all-tests) run all-tests run_pytest pytest-all.log -q -x ;;
        tests)
            run gpu-tests run_pytest pytest-gpu.log -m gpu -q
            run all-tests run_pytest pytest-all.log -q -x ;;
        pytest) run pytest run_pytest pytest.log "$@"; set -- ;;
        cmd) run cmd "$@"; set -- ;;
        bench)
            pats=()
            while [[ $# -gt 0 && ! $1 =~ ^(info|gpu-tests|all-tests|tests|pytest|bench|all)$ ]]; do
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
