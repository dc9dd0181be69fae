#!/bin/bash
# main (9643bc8) vs a (1a1010f: no carry getitems at worker edges) vs b (f13c2fe: + the slab
# pass one low-level layer), separate processes alternated (order reversed each round);
# each version's python/ tree snapshotted to /tmp/dask11-{main,a,b} with main's compiled core.
# logs under bench/results/session20/dask11-ab-*
cd /work/main/.wt/dask11
PY=/work/main/.venv/bin/python
R=bench/results/session20
run() {  # name version args...
  local name=$1 ver=$2; shift 2
  echo "== $(date -u +%T) $name $ver load $(cut -d' ' -f1-3 /proc/loadavg)" >> $R/dask11-ab-console.log
  PYTHONPATH=/tmp/dask11-$ver/python timeout 900 $PY "$@" > $R/dask11-ab-$name-$ver.log 2>&1
  grep -E "^\[|^no task|peak|ratio" $R/dask11-ab-$name-$ver.log | tail -4 >> $R/dask11-ab-console.log
}
for r in 0 1; do
  order="main a b"; [ $r = 1 ] && order="b a main"
  for v in $order; do
    run 0.08gb-w2-j31-r$r $v bench/dask_sc_profile.py --size 0.08GB --planes 128 --chunk-planes 4 --workers 2 --groups 31 --json $R/dask11-ab-0.08gb-w2-j31-r$r-$v.json
  done
done
for r in 0 1; do
  order="b a main"; [ $r = 1 ] && order="main a b"
  for v in $order; do
    run 0.3gb-w2-r$r $v bench/dask_sc_profile.py --size 0.3GB --workers 2 --json $R/dask11-ab-0.3gb-w2-r$r-$v.json
  done
done
echo "== done $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $R/dask11-ab-console.log
