# session 11 shtgpu, GPU call 1 (run through run.sh cmd): variants, then the GPU SHT tests on n / w
cd "$(dirname "$0")/../.." || exit 2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > "$OUT/shtgpu-gpus.txt" 2>&1
timeout 165 python3 bench/gpu/sht_variants.py --json "$OUT/shtgpu-variants.jsonl" 2>&1 | tee "$OUT/shtgpu-variants.log"
echo "== pytest n"
SKYCONV_SHT_SYNTH=n SKYCONV_SHT_ANAL=n timeout 45 python3 -m pytest tests/sht -m gpu -q -x -k "not dask" -p no:cacheprovider 2>&1 | tail -25 | tee "$OUT/shtgpu-pytest-n.log"
echo "== pytest f"
SKYCONV_SHT_SYNTH=f SKYCONV_SHT_ANAL=f timeout 50 python3 -m pytest tests/sht -m gpu -q -x -k "not dask" -p no:cacheprovider 2>&1 | tail -25 | tee "$OUT/shtgpu-pytest-f.log"
