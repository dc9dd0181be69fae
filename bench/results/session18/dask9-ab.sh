#!/bin/bash
# dask9: main's build (/tmp/dask9-main, PYTHONPATH) and this branch alternated, fresh processes.
cd /work/main/.wt/dask9
. /work/venvs/dask9/bin/activate
R=bench/results/session18
mkdir -p /tmp/dask9-cubes
run() {  # tag, args...
  local tag=$1; shift
  for rep in 0 1; do
    for b in main branch; do
      if [ $b = main ]; then PP=/tmp/dask9-main; else PP=; fi
      echo "== $(date -u +%T) $tag $b r$rep load $(cut -d' ' -f1-3 /proc/loadavg)"
      PYTHONPATH=$PP python bench/dask_sc_profile.py "$@" --json $R/dask9-$tag-$b-r$rep.json \
        > $R/dask9-$tag-$b-r$rep.log 2>/dev/null
      grep -E "^\[wave" $R/dask9-$tag-$b-r$rep.log
    done
  done
}
run shape-b32-w1t2 --size 0.08GB --planes 128 --chunk-planes 4 --workers 1 --threads 2 --path /tmp/dask9-cubes/p008.zarr
run 0.3gb-w2t1 --size 0.3GB --workers 2 --path /tmp/dask9-cubes/p03.zarr
echo "== $(date -u +%T) done load $(cut -d' ' -f1-3 /proc/loadavg)"
