#!/bin/bash
# main vs branch, separate processes alternated; logs under bench/results/session19/dask10-ab-*
cd /work/main/.wt/dask10
. /work/venvs/dask9/bin/activate
R=bench/results/session19
run() {  # name version args...
  local name=$1 ver=$2; shift 2
  local pp=""
  [ "$ver" = main ] && pp=/tmp/dask10-main/python
  echo "== $(date -u +%T) $name $ver load $(cut -d' ' -f1-3 /proc/loadavg)" >> $R/dask10-ab-console.log
  PYTHONPATH=$pp timeout 900 python "$@" > $R/dask10-ab-$name-$ver.log 2>&1
  grep -E "^\[|^no task|peak|ratio" $R/dask10-ab-$name-$ver.log | tail -4 >> $R/dask10-ab-console.log
}
for r in 0 1; do
  for v in main branch; do
    run 0.08gb-w2-r$r $v bench/dask_sc_profile.py --size 0.08GB --planes 128 --chunk-planes 4 --workers 2 --json $R/dask10-ab-0.08gb-w2-r$r-$v.json
  done
done
for r in 0 1; do
  for v in main branch; do
    run 0.3gb-w2-r$r $v bench/dask_sc_profile.py --size 0.3GB --workers 2 --json $R/dask10-ab-0.3gb-w2-r$r-$v.json
  done
done
for r in 0 1; do
  for v in main branch; do
    run 0.08gb-w2-j31-r$r $v bench/dask_sc_profile.py --size 0.08GB --planes 128 --chunk-planes 4 --workers 2 --groups 31 --json $R/dask10-ab-0.08gb-w2-j31-r$r-$v.json
  done
done
for r in 0 1; do
  for v in main branch; do
    run rss-0.3gb-w2t1-r$r $v bench/dask_scfind.py --workers 2 --cores 2 --size 0.3GB --planes 256 --json $R/dask10-ab-rss-0.3gb-w2t1-r$r-$v.json
  done
done
echo "== done $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $R/dask10-ab-console.log
