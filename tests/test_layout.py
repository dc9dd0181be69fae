"""The package's house (issue 15): every public name of skyconv 45a1b81 still imports from its
old path, one device rule, and no import cycle or upward import inside python/skyconv."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import skyconv
from skyconv._utils import device as device_mod
from skyconv._utils.device import Device, resolve

PACKAGE = Path(skyconv.__file__).resolve().parent

# Public modules and names of skyconv at 45a1b81 (before the move), by their old import path.
OLD_PUBLIC = {
    "skyconv": [
        "Alm", "AtrousResult", "CudaError", "DeviceError", "GpuMemoryError", "GridResult",
        "Gridder", "HealpixTarget", "InternalError", "KernelSplit", "ShapeError", "Sightlines",
        "SkyconvError", "__version__", "alm2map", "almxfl", "atrous_denoise", "backend_info",
        "filters", "get_num_threads", "grid", "healpix", "last_profile", "map2alm",
        "set_num_threads", "smooth_and_clip", "smooth_map", "split_kernel", "stats",
    ],
    "skyconv.atrous": ["AtrousResult", "atrous_denoise", "atrous_scales"],
    "skyconv.compat.cygrid": ["Cygrid", "ShapeError", "SlGrid", "WcsGrid"],
    "skyconv.compat.healpy": [
        "Alm", "UNSEEN", "alm2map", "almxfl", "gauss_beam", "map2alm", "smoothing",
    ],
    "skyconv.compat.sofia": ["FWHM_CONST", "SCfinder_mem", "install", "uninstall"],
    "skyconv.cube": ["FWHM_CONST", "NoiseReport", "smooth_and_clip"],
    "skyconv.filters": [
        "Correlate", "Gaussian", "Uniform", "chain", "convolve1d", "correlate1d",
        "gaussian_filter1d", "uniform_filter1d",
    ],
    "skyconv.grid": [
        "GridResult", "Gridder", "HealpixTarget", "Sightlines", "accumulate", "grid",
        "kernel_args", "prepare_samples", "resolve_target",
    ],
    "skyconv.healpix": [
        "MAX_NSIDE", "ang2pix", "isnsideok", "nest2ring", "npix2nside", "nside2npix", "pix2ang",
        "ring2nest", "ring_info",
    ],
    "skyconv.sht": ["Alm", "UNSEEN", "alm2map", "almxfl", "map2alm"],
    "skyconv.smooth": ["METHODS", "gauss_window", "kernel_profile", "profile_window", "smooth_map"],
    "skyconv.split": [
        "ALPHA", "KernelSplit", "PROFILE_NODES", "TAIL", "THETA_STEPS", "apply_split",
        "cached_split", "effective_lmax", "kernel_reach", "split_kernel",
    ],
    "skyconv.stats": [
        "MAD_TO_STD", "fit_gaussian", "gauss", "histogram", "mad", "noise", "scipy_fitter",
        "sofia1_rms", "sofia1_stride", "sofia2_cadence", "std",
    ],
    # Private modules other code imports by name: the Rust core (src/py/errors.rs) and old
    # imports of the exception classes.
    "skyconv._errors": [
        "CudaError", "DeviceError", "GpuMemoryError", "InternalError", "ShapeError",
        "SkyconvError",
    ],
}  # fmt: skip


# Private names that modules owned elsewhere (compat.healpy) import from the families.
KEPT_PRIVATE = {
    "skyconv.sht": ["_npix2nside", "_components", "_alm_array"],
    "skyconv.smooth": ["_missing", "_ring", "_harmonic"],
}


@pytest.mark.parametrize("module", sorted(KEPT_PRIVATE))
def test_private_names_other_modules_use_are_kept(module):
    mod = importlib.import_module(module)
    assert [n for n in KEPT_PRIVATE[module] if not hasattr(mod, n)] == []


@pytest.mark.parametrize("module", sorted(OLD_PUBLIC))
def test_old_public_names_import_from_their_old_path(module):
    mod = importlib.import_module(module)
    missing = [name for name in OLD_PUBLIC[module] if not hasattr(mod, name)]
    assert not missing, f"{module} lost {missing}"
    for name in OLD_PUBLIC[module]:  # `from module import name` works
        exec(f"from {module} import {name}", {})


def test_old_paths_are_the_same_objects():
    """The shims re-export, they do not copy: one class, one function, one cache."""
    import skyconv._errors
    import skyconv.exceptions
    import skyconv.smooth.split
    import skyconv.split

    assert skyconv._errors.ShapeError is skyconv.exceptions.ShapeError is skyconv.ShapeError
    assert skyconv.split.cached_split is skyconv.smooth.split.cached_split
    assert skyconv.split.KernelSplit is skyconv.KernelSplit
    assert skyconv.smooth.smooth_map is skyconv.smooth_map


# ----------------------------------------------------------------------------------------------
# The device rule


def test_device_names_resolve(monkeypatch):
    monkeypatch.delenv("SKYCONV_DEVICE", raising=False)
    assert resolve("cpu") == Device("cpu") and str(resolve(" CPU ")) == "cpu"
    auto = resolve("auto")
    assert auto.auto and auto.kind in ("cpu", "cuda")
    assert resolve(None) == auto  # None: no SKYCONV_DEVICE, so "auto"
    monkeypatch.setenv("SKYCONV_DEVICE", "cpu")
    assert resolve(None) == Device("cpu")
    dev = Device("cuda", 2)
    assert resolve(dev) is dev and str(dev) == dev.core == "cuda:2"
    assert str(Device("cuda")) == "cuda"


def test_device_errors_name_device(monkeypatch):
    with pytest.raises(TypeError, match="device"):
        resolve(0)
    for bad in ("tpu", "cuda:", "cuda:-1", "cuda:x", "cpu:0"):
        with pytest.raises(ValueError, match="device"):
            resolve(bad)
    monkeypatch.setenv("SKYCONV_DEVICE", "tpu")
    with pytest.raises(ValueError, match="SKYCONV_DEVICE"):
        resolve(None)


def test_cuda_n_without_a_gpu_is_a_device_error(monkeypatch):
    if skyconv.backend_info()["cuda"]["available"]:
        pytest.skip("a GPU works here")
    for name in ("cuda", "cuda:1", "gpu"):
        with pytest.raises(skyconv.DeviceError):
            resolve(name)


def test_one_default_everywhere():
    """Every public function and class with a ``device`` argument defaults to None (the one
    rule: None -> SKYCONV_DEVICE -> "auto")."""
    import inspect

    from skyconv.compat import cygrid

    seen = []
    for module in sorted(OLD_PUBLIC):
        mod = importlib.import_module(module)
        for name in OLD_PUBLIC[module]:
            obj = getattr(mod, name)
            if not callable(obj):
                continue
            try:
                params = inspect.signature(obj).parameters
            except (TypeError, ValueError):
                continue
            if "device" in params and params["device"].default is not inspect.Parameter.empty:
                seen.append(f"{module}.{name}")
                assert params["device"].default is None, f"{module}.{name}"
    assert inspect.signature(cygrid.Cygrid).parameters["device"].default is None
    assert len(seen) >= 15, seen


def test_device_rule_is_written_once():
    """No module but _utils/device.py reads SKYCONV_DEVICE or type-checks ``device``."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path == Path(device_mod.__file__).resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            args = [ast.unparse(a) for a in node.args]
            if (
                args[:1] == ["'SKYCONV_DEVICE'"]
                or args[:1] == ["device"]
                and (ast.unparse(node.func) == "isinstance")
            ):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not offenders, offenders


# ----------------------------------------------------------------------------------------------
# Imports: no cycle, no upward import


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """skyconv modules ``path`` imports, at top level and inside functions (``from pkg import
    x`` imports the module pkg.x when there is one, else pkg)."""
    tree = ast.parse(path.read_text())
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("skyconv")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = base[: len(base) - node.level + 1]
                mod = ".".join(pkg + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("skyconv"):
                continue
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.add(sub if sub in modules or sub == "skyconv._core" else mod)
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        deps = _imports(path, name, set(files))
        graph[name] = {m for m in deps if m in files and m != name}
    return graph


def _layer(name: str) -> int:
    """0: the core and private helpers; 1: the families; 2: compat, cli, dask and the package
    root (which only re-exports)."""
    parts = name.split(".")
    if name == "skyconv":
        return 2
    top = parts[1]
    if top in ("_core", "_utils", "exceptions", "_errors"):
        return 0
    if top in ("compat", "cli", "dask", "_demo", "__main__") or top.startswith("_cli"):
        return 2
    return 1


def test_import_graph_has_no_cycle():
    """A package's __init__ imports its submodules (re-exports), so a submodule importing its
    package back, or a family importing the root, shows up as a cycle too."""
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                cycle = stack[stack.index(m) :] + [m]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)


def test_no_module_imports_from_a_layer_above():
    graph = _graph()
    bad = [
        f"{a} -> {b}"
        for a, deps in graph.items()
        for b in deps
        if _layer(b) > _layer(a) and not (a == "skyconv" or b.startswith(a + "."))
    ]
    assert not bad, bad


def test_walker_finds_a_planted_cycle(tmp_path):
    """The cycle check can fail: two modules importing each other inside functions."""
    pkg = tmp_path / "skyconv"
    (pkg / "fam").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "fam" / "__init__.py").write_text("")
    (pkg / "fam" / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "fam" / "b.py").write_text("from .a import f\n")
    (pkg / "compat.py").write_text("")
    (pkg / "fam" / "c.py").write_text("from ..compat import x\n")
    global PACKAGE
    saved, PACKAGE = PACKAGE, pkg
    try:
        with pytest.raises(AssertionError, match="import cycle"):
            test_import_graph_has_no_cycle()
        with pytest.raises(AssertionError, match="fam.c -> skyconv.compat"):
            test_no_module_imports_from_a_layer_above()
    finally:
        PACKAGE = saved


def test_init_files_only_re_export():
    """__init__.py files hold imports, ``__all__``/``__version__`` and (the root) the CUDA
    library folders handed to the core: no function, class or logic."""
    bad = []
    for path in PACKAGE.rglob("__init__.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # the docstring
            if isinstance(node, ast.Assign) and all(
                isinstance(t, ast.Name) and t.id in ("__all__", "__version__") for t in node.targets
            ):
                continue
            if isinstance(node, ast.Expr) and ast.unparse(node).startswith("_core."):
                continue  # the root hands the core its settings (CUDA library folders)
            bad.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)[:60]}")
    assert not bad, bad
