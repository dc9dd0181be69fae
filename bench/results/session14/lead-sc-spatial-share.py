import time, numpy as np, skyconv
rng = np.random.default_rng(3)
cube = rng.standard_normal((64, 512, 512), dtype=np.float32)
cube[32, 200:210, 200:210] += 3
skyconv.smooth_and_clip(cube[:8, :64, :64].copy(), device="cpu")
def t(**kw):
    best = 1e9
    for _ in range(3):
        t0 = time.process_time(); skyconv.smooth_and_clip(cube, device="cpu", **kw); best = min(best, time.process_time() - t0)
    return best * 1e3
for xy, z in [((0,),(0,)), ((0,),(0,3,7,15)), ((3,),(0,)), ((3,),(0,3,7,15)), ((6,),(0,)), ((6,),(0,3,7,15)), ((0,3,6),(0,3,7,15))]:
    print(xy, z, round(t(kernels_xy=xy, kernels_z=z)))
