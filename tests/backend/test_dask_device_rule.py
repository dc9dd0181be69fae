"""The device of a Dask task (skyconv._dask.device): checked on the client, resolved on the
worker at run time, counted per stage; the S+C stages through it give the single call's mask
and noise on the CPU engine (every CPU machine) and on the GPU engine (tests marked gpu)."""

from __future__ import annotations

import os

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

from _hang import within  # noqa: E402

import skyconv  # noqa: E402
from skyconv import ArgumentError, ArgumentTypeError, DeviceError  # noqa: E402
from skyconv._dask import device as ddev  # noqa: E402

HAS_GPU = skyconv.backend_info()["cuda"]["available"]


def cube(rng, shape=(14, 24, 22), dtype=np.float32):
    x = rng.standard_normal(shape).astype(dtype)
    x[4:9, 5:14, 7:12] += 2.5  # across the chunk edges below
    x[9:12, 14:19, 15:19] += 4.0
    x[6:10, 0:9, 16:22] = np.nan
    return x


# ------------------------------------------------------------------ the rule, in this process


@pytest.mark.parametrize(
    "name, want",
    [(None, None), ("CPU", "cpu"), (" cuda ", "cuda"), ("GPU", "gpu"), ("cuda:3", "cuda:3"),
     ("Auto", "auto")],
)  # fmt: skip
def test_check_keeps_the_name_without_resolving(name, want):
    """The client only checks the spelling: "cuda:3" passes on a machine without GPU 3."""
    assert ddev.check(name) == want


@pytest.mark.parametrize("name", ["tpu", "cuda:x", "cuda:-1", ""])
def test_check_refuses_unknown_names(name):
    with pytest.raises(ArgumentError, match="'auto', 'cpu', 'cuda' or 'cuda:N'"):
        ddev.check(name)


def test_check_refuses_other_types():
    with pytest.raises(ArgumentTypeError, match="device"):
        ddev.check(0)


def test_on_worker_resolves_in_the_task_and_counts(monkeypatch):
    """A fake worker environment: SKYCONV_DEVICE and CUDA_VISIBLE_DEVICES of the process that
    runs the task decide, and the log names both. (CUDA_VISIBLE_DEVICES is set only around
    CPU resolutions, which never start CUDA: this process keeps its GPUs on a GPU machine.)"""
    ddev.reset()
    orig = os.environ.get("CUDA_VISIBLE_DEVICES")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("SKYCONV_DEVICE", "cpu")
    assert ddev.on_worker("s", None) == "cpu"  # the worker's SKYCONV_DEVICE
    assert ddev.on_worker("s", "cpu") == "cpu"
    if orig is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", orig)
    monkeypatch.delenv("SKYCONV_DEVICE")
    auto = ddev.on_worker("t", None)  # "auto": this process's GPU, else the CPU
    assert auto == ("cuda" if HAS_GPU else "cpu")
    ddev.on_worker("t", "cpu")
    tag = "" if orig is None else f" (CUDA_VISIBLE_DEVICES={orig})"
    want_t = {f"cpu{tag}": 2} if auto == "cpu" else {f"cpu{tag}": 1, f"cuda{tag}": 1}
    assert ddev.devices_used() == {"s": {"cpu (CUDA_VISIBLE_DEVICES=1)": 2}, "t": want_t}
    assert "s: cpu (CUDA_VISIBLE_DEVICES=1) x 2" in ddev.summary()
    ddev.reset()
    assert ddev.devices_used() == {}
    assert ddev.summary() == "(no skyconv Dask task ran)"


@pytest.mark.skipif(HAS_GPU, reason="needs a machine without a GPU")
def test_gpu_time_counts_the_admissions_of_this_process(monkeypatch):
    """gpu_time: calls, wait and admitted seconds per GPU (the core's admission counters,
    read here without a GPU through the admission probe), cleared by reset."""
    from skyconv import _core

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    ddev.reset()
    assert ddev.gpu_time() == {}
    for _ in range(3):
        _core._gpu_admission_probe(5, 8, 2000)
    got = ddev.gpu_time()
    assert list(got) == ["cuda:5"]
    assert got["cuda:5"]["calls"] == 3
    assert got["cuda:5"]["admitted_s"] >= 3 * 2000e-6  # at least one 2 ms piece per call
    assert got["cuda:5"]["waited_s"] >= 0
    ddev.reset()
    assert ddev.gpu_time() == {}


def test_copied_counts_the_gpu_calls_arrays_by_gpu(monkeypatch):
    """bytes_used: the bytes of the arrays a GPU call took and returned (nested in tuples,
    None and floats counting nothing), per (device, CUDA_VISIBLE_DEVICES); CPU calls add
    nothing; cleared by reset."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    ddev.reset()
    a, m = np.zeros((3, 4, 5), np.float32), np.zeros((3, 4, 5), np.uint8)
    ddev.copied("scfind.sample", "cuda", a, m, None, (np.zeros(7, np.int64), (1.0, 2.0), a))
    ddev.copied("scfind.clip", "cuda", a, m, m)
    ddev.copied("scfind.clip", "cpu", a, m, m)
    assert ddev.bytes_used() == {"cuda (CUDA_VISIBLE_DEVICES=1)": 240 + 60 + 56 + 240 + 240 + 120}
    ddev.reset()
    assert ddev.bytes_used() == {}


@pytest.mark.skipif(HAS_GPU, reason="needs a machine without a GPU")
def test_on_worker_cuda_without_gpu_is_a_device_error():
    """A task asked for "cuda" on a worker with no GPU fails with DeviceError, not on the CPU."""
    with pytest.raises(DeviceError):
        ddev.on_worker("s", "cuda")


@pytest.mark.skipif(HAS_GPU, reason="needs a machine without a GPU")
def test_cuda_is_resolved_on_the_worker_not_the_client(rng):
    """device="cuda" builds the graph on a client without a GPU (the workers may have one);
    the tasks fail with the DeviceError of the worker that has none."""
    x = da.from_array(cube(rng), chunks=(7, 12, 11))
    with dask.config.set(scheduler="synchronous"):
        out = skyconv.filters.gaussian_filter1d(x, 1.5, axis=0, device="cuda")  # lazy: no error
        with pytest.raises(DeviceError):
            out.compute()
        with pytest.raises(DeviceError):
            skyconv.smooth_and_clip(x, device="cuda")


# ------------------------------------------------------------------ stages on the cluster


@pytest.fixture
def staged(monkeypatch):
    """The staged S+C graph even for the small cubes of these tests (not the one-task path)."""
    from skyconv._dask import cube as dcube

    monkeypatch.setattr(dcube, "SINGLE_TASK_BYTES", 0)


@pytest.mark.parametrize("requested", ["cpu", None])
def test_scfind_stages_on_the_workers_device(dask_client, rng, requested, staged):
    """S+C through the 2-worker cluster: each stage's device is the worker's (the CPU here,
    and "auto"/None on a GPU machine is its GPU), and the answer is the single call's."""
    x = cube(rng)
    kw = {"threshold": 4.0, "return_noise": True, "kernels_xy": (0, 3), "kernels_z": (0, 3)}
    want, nw = skyconv.smooth_and_clip(x, device=requested, **kw)
    ddev.reset(dask_client)
    got, ng = skyconv.smooth_and_clip(da.from_array(x, chunks=(7, 12, 11)), device=requested, **kw)
    got = got.compute()
    np.testing.assert_array_equal(got, want)
    assert want.sum() > 0
    assert [ng.rms0] + ng.rms == [nw.rms0] + nw.rms
    used = ddev.devices_used(dask_client)
    engine = "cuda" if (HAS_GPU and requested is None) else "cpu"
    for stage in ("scfind.spatial", "scfind.sample", "scfind.clip"):
        assert set(used[stage]) == {engine}, used
        # one task per block of each stage's chunking, per kernel that has that stage
        assert sum(used[stage].values()) >= 2, used
    secs = ddev.seconds_used(dask_client)
    assert set(secs) == {"scfind.spatial", "scfind.sample", "scfind.clip"}
    assert all(0 < v < 60 for v in secs.values()), secs


def test_one_task_scfind_records_its_device(dask_client, rng):
    """A small cube runs the single call in one task: that task resolves the device too."""
    x = cube(rng)
    ddev.reset(dask_client)
    got = skyconv.smooth_and_clip(da.from_array(x, chunks=(7, 12, 11)), device="cpu")
    np.testing.assert_array_equal(got.compute(), skyconv.smooth_and_clip(x, device="cpu"))
    # exactly one run of the single call (the persisted array's fused copy of the task once ran
    # it a second time)
    assert ddev.devices_used(dask_client) == {"scfind.single": {"cpu": 1}}
    assert ddev.seconds_used(dask_client)["scfind.single"] > 0


def test_atrous_and_grid_record_their_stages(dask_client, rng, monkeypatch):
    from skyconv._dask import atrous

    monkeypatch.setattr(atrous, "SINGLE_TASK_BYTES", 0)  # the staged loop, not one task
    monkeypatch.setattr(atrous, "SINGLE_TASK_MEMORY_FRACTION", 0)
    ddev.reset(dask_client)
    x = rng.normal(size=(16, 20, 20))
    want = skyconv.atrous_denoise(x, device="cpu")
    got = skyconv.atrous_denoise(da.from_array(x, chunks=(8, 10, 20)), device="cpu")
    assert got.iterations == want.iterations
    np.testing.assert_allclose(np.asarray(got.data), want.data, rtol=0, atol=1e-6)
    lons = rng.uniform(-1, 1, 4000)
    lats = rng.uniform(-1, 1, 4000)
    data = rng.normal(size=(4000, 2))
    tl, tb = np.meshgrid(np.linspace(-1, 1, 12), np.linspace(-1, 1, 12))
    target = skyconv.Sightlines(tl.ravel(), tb.ravel())
    kw = {"kernel_params": 0.1, "dtype": np.float64, "device": "cpu"}
    want = skyconv.grid(lons, lats, data, target, **kw)
    got = skyconv.grid(da.from_array(lons, chunks=1000), da.from_array(lats, chunks=1000),
                       da.from_array(data, chunks=(1000, 2)), target, **kw)  # fmt: skip
    np.testing.assert_allclose(got.cube.compute(), want.cube, rtol=1e-12, equal_nan=True)
    used = ddev.devices_used(dask_client)
    assert used["atrous.smooth"] == {"cpu": sum(used["atrous.smooth"].values())}
    assert used["atrous.finish"] == {"cpu": sum(used["atrous.finish"].values())}  # a host pass
    assert used["grid.partial"] == {"cpu": 4}
    # The two à trous stages resolve through stage() and are timed; grid's are counted only.
    assert set(ddev.seconds_used(dask_client)) == {"atrous.smooth", "atrous.finish"}


# ------------------------------------------------------------------ GPU (run on the H100s)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "opts",
    [
        {},  # SoFiA-2's defaults: boxcars, precision "sofia2" (exact running means)
        {"kernels_xy": (0, 3, 6), "kernels_z": (0, 3, 7), "statistic": "mad"},
        {"spatial": "gaussian", "spectral": "gaussian", "precision": "float64",
         "edge_mode": "reflect", "kernels_xy": (0, 3), "kernels_z": (0, 4)},
    ],
)  # fmt: skip
def test_gpu_core_stages_equal_the_gpu_single_call(rng, dtype, opts, staged):
    """The GPU stage functions through Dask's synchronous scheduler (the same process: the
    GPU engine) give the GPU single call's mask and noise (bit for bit for "sofia2")."""
    x = cube(rng, shape=(30, 40, 36), dtype=dtype)
    kw = {"threshold": 4.0, "return_noise": True, **opts}
    want, nw = skyconv.smooth_and_clip(x, device="cuda", **kw)
    ddev.reset()
    with dask.config.set(scheduler="synchronous"):
        got, ng = skyconv.smooth_and_clip(da.from_array(x, chunks=(8, 16, 12)), device="cuda",
                                          **kw)  # fmt: skip
        got = got.compute()
    np.testing.assert_array_equal(got, want)
    # bit for bit for precision "sofia2"; 1e-12 relative allowed for "float64" (as on the CPU)
    rtol = 1e-12 if opts.get("precision") == "float64" else 0
    np.testing.assert_allclose([ng.rms0] + ng.rms, [nw.rms0] + nw.rms, rtol=rtol, atol=0)
    used = ddev.devices_used()
    names = set(used["scfind.spatial"]) | set(used["scfind.sample"]) | set(used["scfind.clip"])
    assert names == {"cuda"}, used


@pytest.mark.gpu
def test_gpu_stage_functions_equal_the_cpu_ones_for_sofia2(rng):
    """precision="sofia2" (the default): the engines are bit-identical, so each GPU stage
    equals the CPU stage on the same block (planes for the spatial, columns for the spectral)."""
    from skyconv import _core

    x = cube(rng, shape=(20, 32, 28))
    m = np.zeros(x.shape, np.uint8)
    m[5:8, 10:20, 10:20] = 1
    m |= np.isnan(x).astype(np.uint8) << 7
    sigma = 1.2739827004320285  # a boxcar of 3 pixels, as skyconv.cube._setup gives it
    spec = ("boxcar", sigma, sigma, "boxcar", 5.0, False)
    args = ("constant", ("copysign", 2.0), 0.9, True)
    a = _core._scfind_spatial(x, m, spec, *args, device="cpu")
    b = _core._scfind_spatial(x, m, spec, *args, device="cuda")
    np.testing.assert_array_equal(a, b)
    ca = _core._scfind_spectral(a, m, spec, "constant", True, device="cpu")
    cb = _core._scfind_spectral(a, m, spec, "constant", True, device="cuda")
    np.testing.assert_array_equal(ca, cb)
    assert np.isnan(cb).sum() == np.isnan(x).sum()


@pytest.mark.gpu
def test_scfind_on_one_worker_per_gpu(rng, staged):
    """Two workers started as dask-cuda starts them (CUDA_VISIBLE_DEVICES=i, i over the GPUs):
    S+C's stages run on each worker's own GPU ("auto" and "cuda") and the mask and noise equal
    the GPU single call's."""
    distributed = pytest.importorskip("distributed")
    n = skyconv.backend_info()["cuda"]["device_count"]
    gpus = [str(i % n) for i in range(2)]
    workers = {
        i: {
            "cls": distributed.Nanny,
            "options": {"nthreads": 2, "env": {"CUDA_VISIBLE_DEVICES": g}},
        }
        for i, g in enumerate(gpus)
    }
    scheduler = {"cls": distributed.Scheduler, "options": {"dashboard_address": None}}
    x = cube(rng, shape=(24, 40, 36))
    kw = {"threshold": 4.0, "return_noise": True}
    want, nw = skyconv.smooth_and_clip(x, device="cuda", **kw)
    with (
        distributed.SpecCluster(scheduler=scheduler, workers=workers) as cluster,
        distributed.Client(cluster) as client,
    ):
        for device in (None, "cuda"):
            ddev.reset(client)

            def run(device=device):
                got, ng = skyconv.smooth_and_clip(da.from_array(x, chunks=(6, 20, 18)),
                                                  device=device, **kw)  # fmt: skip
                return got.compute(), ng

            # Two threads per worker call the GPU at once (session 9: no progress in 170 s,
            # before the core admitted GPU calls in the calling thread): a hang fails here.
            got, ng = within(180, run)
            np.testing.assert_array_equal(got, want)
            assert [ng.rms0] + ng.rms == [nw.rms0] + nw.rms
            used = ddev.devices_used(client)
            names = set().union(*(used[k] for k in ("scfind.spatial", "scfind.sample",
                                                     "scfind.clip")))  # fmt: skip
            assert names <= {f"cuda (CUDA_VISIBLE_DEVICES={g})" for g in gpus}, used
            assert all(name.startswith("cuda") for name in names)
