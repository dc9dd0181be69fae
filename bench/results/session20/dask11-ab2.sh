#!/bin/bash
# main (9643bc8) vs d (c2b6c0a: the branch's final code), separate processes alternated, after
# the test run; snapshots /tmp/dask11-{main,d} (python/ trees with main's compiled core)
cd /work/main/.wt/dask11
PY=/work/main/.venv/bin/python
R=bench/results/session20
run() {  # name version args...
  local name=$1 ver=$2; shift 2
  echo "== $(date -u +%T) $name $ver load $(cut -d' ' -f1-3 /proc/loadavg)" >> $R/dask11-ab-console.log
  PYTHONPATH=/tmp/dask11-$ver/python timeout 900 $PY "$@" > $R/dask11-ab-$name-$ver.log 2>&1
  grep -E "^\[|^no task|peak|ratio" $R/dask11-ab-$name-$ver.log | tail -4 >> $R/dask11-ab-console.log
}
for r in 2 3; do
  order="d main"; [ $r = 3 ] && order="main d"
  for v in $order; do
    run 0.08gb-w2-j31-r$r $v bench/dask_sc_profile.py --size 0.08GB --planes 128 --chunk-planes 4 --workers 2 --groups 31 --json $R/dask11-ab-0.08gb-w2-j31-r$r-$v.json
  done
done
for v in d main; do
  run 0.3gb-w2-r2 $v bench/dask_sc_profile.py --size 0.3GB --workers 2 --json $R/dask11-ab-0.3gb-w2-r2-$v.json
done
echo "== done $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $R/dask11-ab-console.log
