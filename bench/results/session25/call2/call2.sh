#!/usr/bin/env bash
# session 25 call 2 (issue 22): call 1 (06df019) plus sc_prepared without branches and the row tiles
# without a pad (16-byte column groups XORed with the line: LDS.128/STS.128), registers bounded
# (65004df, .gpu) against main (ed6912b, .scbox/base): cold compile of scfind, cube_profile
# scfind_2gb alternated (medians of 7; checksums must stay b56747501165 / e9da6c8cb232), every
# GPU test under tests/cube on the new wheel, then ncu of the boxcar kernels (256 MB case).
# Run as: bash bench/gpu/run.sh cmd bash bench/results/session25/call2/call2.sh
cd "$(dirname "$0")/../../../.." || exit 2
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee $L/info.txt
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-base .scbox/base/*.whl 2>&1 | tail -1
CC='import sys, time
from skyconv import _core
t = time.perf_counter(); n, hit = _core._compile_module_cached("scfind", 9, 0)
print(f"{sys.argv[1]} scfind {time.perf_counter() - t:.2f} s {n} B hit={hit}")'
for w in new base; do
  PP=$PYTHONPATH; [[ $w == base ]] && PP=/tmp/site-base:$PYTHONPATH
  SKYCONV_CACHE_DIR=$(mktemp -d) PYTHONPATH=$PP timeout 60 python3 -c "$CC" $w 2>&1 | tee -a $L/compile.txt
  PYTHONPATH=$PP python3 -c "
import numpy as np, skyconv
skyconv.smooth_and_clip(np.random.default_rng(0).normal(size=(20, 64, 64)).astype(np.float32), device='cuda')"
done
for w in new base new base new base; do
  [[ $SECONDS -gt 220 ]] && break
  PP=$PYTHONPATH; [[ $w == base ]] && PP=/tmp/site-base:$PYTHONPATH
  PYTHONPATH=$PP timeout 60 python3 bench/gpu/cube_profile.py --repeats 7 --only scfind_2gb,scfind > $L/cube-$w.log 2>&1
  echo "== $w"; grep -E 'e2e|stages' $L/cube-$w.log
  cat $L/cube-$w.log >> $L/cube-all.log
done
timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/cube > $L/pytest-gpu.log 2>&1; echo "pytest rc=$?"
grep -E "^FAILED|^ERROR" $L/pytest-gpu.log | head -8; tail -1 $L/pytest-gpu.log
NCU=/usr/local/cuda/bin/ncu
timeout 100 $NCU --clock-control none -k regex:'sofia2_boxcar_(rows|lines)_r' --launch-count 6 --section MemoryWorkloadAnalysis_Tables \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
  --section LaunchStats --section InstructionStats \
  python3 bench/gpu/cube_profile.py --repeats 1 --only scfind > $L/ncu-boxcars.txt 2> $L/ncu-boxcars.err
echo "ncu rc=$?"; grep -E "sofia2_boxcar|Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Issued Warp Per|No Eligible|Executed Instructions  " $L/ncu-boxcars.txt | head -80
