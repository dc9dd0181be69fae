#!/bin/bash
# dask9: peak RSS per worker, main's build and this branch alternated (bench/dask_scfind.py).
cd /work/main/.wt/dask9
. /work/venvs/dask9/bin/activate
R=bench/results/session18
for rep in 0 1; do
  for b in main branch; do
    if [ $b = main ]; then PP=/tmp/dask9-main; else PP=; fi
    for lay in "--workers 2 --dask-threads 1" "--workers 1 --dask-threads 2"; do
      tag=$(echo $lay | awk '{print "w"$2"t"$4}')
      echo "== $(date -u +%T) $b $tag r$rep load $(cut -d' ' -f1-3 /proc/loadavg)"
      PYTHONPATH=$PP python bench/dask_scfind.py $lay --cores 2 --size 0.3GB --planes 256 \
        --dir /tmp/dask9-cubes/rss --json $R/dask9-rss-$b-0.3gb-$tag-r$rep.json \
        > $R/dask9-rss-$b-0.3gb-$tag-r$rep.log 2>/dev/null
      grep -E "peak RSS|ratio|equal" $R/dask9-rss-$b-0.3gb-$tag-r$rep.log | head -3
    done
  done
done
echo "== $(date -u +%T) done"
