"""healpy 1.20.1's own test suite, run with skyconv.compat.healpy substituted into healpy.

At test time the healpy 1.20.1 source archive is fetched from PyPI (its URL from PyPI's JSON
API, checked against the published sha256, cached in ``$XDG_CACHE_HOME/skyconv``); only its
``test/`` folder (tests and their data) is extracted into a temporary folder. Nothing of healpy's
code is in this repository. The suite runs in a subprocess with tests/compat/_healpy_suite_plugin.py
substituting compat.healpy's functions into healpy; the tests that do not pass there run again
with plain healpy (``SKYCONV_HEALPY_SUITE_FULL=1``: the whole suite), and every test that passes
with plain healpy must pass with skyconv substituted. Both runs share one time limit.

Tests that need the network (healpy-data downloads of pixel windows and pixel weights) fail in
both runs when it is down and pass in both when it is up; they need no exclusion list.

Marked ``healpy_suite`` (deselect with ``-m "not healpy_suite"``); skipped with the reason when
healpy is not installed or PyPI cannot be reached. Set ``SKYCONV_HEALPY_SDIST`` to a local
healpy-1.20.1.tar.gz to run offline.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.healpy_suite

VERSION = "1.20.1"
PYPI_JSON = "https://pypi.org/pypi/healpy/json"
RUN_LIMIT_S = 480  # both runs together (about 70 s of CPU on an idle machine)

# Differences from plain healpy that are deliberate improvements, each with its own test in
# tests/compat/test_compat_healpy.py (none so far).
IMPROVEMENTS: dict[str, str] = {}


def _sdist_info():
    with urllib.request.urlopen(PYPI_JSON, timeout=20) as r:
        meta = json.load(r)
    files = [f for f in meta["releases"][VERSION] if f["packagetype"] == "sdist"]
    f = files[0]
    return urllib.parse.urljoin(PYPI_JSON, f["url"]), f["digests"]["sha256"]


def _archive() -> bytes:
    local = os.environ.get("SKYCONV_HEALPY_SDIST")
    if local:
        return Path(local).read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "skyconv"
    path = cache / f"healpy-{VERSION}.tar.gz"
    try:
        url, sha = _sdist_info()
    except (OSError, KeyError, IndexError, ValueError) as exc:
        if path.exists():  # checked against PyPI's sha256 when it was stored
            return path.read_bytes()
        pytest.skip(f"cannot reach PyPI for healpy {VERSION}'s source archive: {exc}")
    if path.exists() and hashlib.sha256(path.read_bytes()).hexdigest() == sha:
        return path.read_bytes()
    try:
        with urllib.request.urlopen(url, timeout=120) as r:
            data = r.read()
    except OSError as exc:
        pytest.skip(f"cannot download healpy {VERSION}'s source archive: {exc}")
    assert hashlib.sha256(data).hexdigest() == sha, "healpy archive does not match PyPI's sha256"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError:
        pass  # caching is optional
    return data


def _extract_tests(data: bytes, dest: Path) -> Path:
    """healpy's test/ folder under ``dest`` (one copy per run: the tests write files)."""
    prefix = f"healpy-{VERSION}/test/"
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        members = [m for m in tf.getmembers() if m.name.startswith(prefix) and m.isreg()]
        tf.extractall(dest, members=members, filter="data")
    root = dest / f"healpy-{VERSION}"
    (root / "pytest.ini").write_text("[pytest]\n")  # keep our pyproject's options out
    return root


def _run(root: Path, xml: Path, plugin: bool, timeout: float, nodeids=("test",)):
    """Run healpy's tests (``nodeids``) under ``root``; the log, or a test failure on timeout."""
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1")
    args = [sys.executable, "-m", "pytest", *nodeids, "-q", "-p", "no:cacheprovider"]
    args += [f"--junitxml={xml}", "-W", "ignore"]
    if plugin:
        tests_dir = str(Path(__file__).resolve().parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tests_dir, env.get("PYTHONPATH")]))
        env["SKYCONV_SUITE_REPORT"] = str(xml.parent / "substituted.txt")
        args += ["-p", "_healpy_suite_plugin"]
    try:
        proc = subprocess.run(
            args,
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=max(1.0, timeout),
        )
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"healpy's suite ({'skyconv' if plugin else 'healpy'} run) passed its time limit"
        )
    assert xml.exists(), f"no report from healpy's suite:\n{proc.stdout[-3000:]}"
    return proc.stdout


def _nodeid(root: Path, classname: str, name: str) -> str:
    """pytest node id of a junit test case (classname 'test.test_x.TestClass')."""
    parts = classname.split(".")
    for i in range(len(parts), 0, -1):
        path = "/".join(parts[:i]) + ".py"
        if (root / path).exists():
            return "::".join([path, *parts[i:], name])
    raise AssertionError(f"no test file for {classname}")


def _outcomes(root: Path, xml: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = _nodeid(root, case.get("classname"), case.get("name"))
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            out[name] = "failed"
        elif "skipped" in kinds:
            out[name] = "skipped"
        else:
            out.setdefault(name, "passed")
    return out


def test_healpy_suite_passes_with_skyconv(tmp_path, record_property):
    """Every test of healpy's suite that passes with healpy passes with skyconv substituted.

    The whole suite runs with skyconv substituted; then the tests that did not pass run again
    with plain healpy (all of them with SKYCONV_HEALPY_SUITE_FULL=1): any that passes there
    is a regression.
    """
    healpy = pytest.importorskip("healpy")
    data = _archive()
    roots = {key: _extract_tests(data, tmp_path / key) for key in ("healpy", "skyconv")}
    t0 = time.perf_counter()
    log = _run(roots["skyconv"], tmp_path / "skyconv.xml", True, RUN_LIMIT_S)
    sky = _outcomes(roots["skyconv"], tmp_path / "skyconv.xml")
    t_sky = time.perf_counter() - t0
    substituted = (tmp_path / "substituted.txt").read_text().split()
    assert "map2alm" in substituted and "smoothing" in substituted, substituted
    assert len(sky) > 300, f"too few healpy tests ran ({len(sky)}):\n{log[-3000:]}"
    full = os.environ.get("SKYCONV_HEALPY_SUITE_FULL") == "1"
    again = ["test"] if full else sorted(n for n, v in sky.items() if v != "passed")
    plain = {}
    if again:
        left = RUN_LIMIT_S - (time.perf_counter() - t0)
        _run(roots["healpy"], tmp_path / "healpy.xml", False, left, again)
        plain = _outcomes(roots["healpy"], tmp_path / "healpy.xml")
    wall = time.perf_counter() - t0
    n_sky = sum(v == "passed" for v in sky.values())
    n_plain = sum(v == "passed" for v in plain.values())
    summary = (
        f"healpy {healpy.__version__} running healpy {VERSION}'s suite: {len(sky)} tests, "
        f"{n_sky} pass with {len(substituted)} skyconv functions substituted ({t_sky:.0f} s); "
        + (
            f"{n_plain} pass with plain healpy"
            if full
            else f"of the {len(again)} others, {n_plain} pass with plain healpy"
        )
        + f" ({wall:.0f} s in all)"
    )
    record_property("healpy_suite", summary)
    print(summary)
    regressions = sorted(n for n, v in plain.items() if v == "passed" and sky.get(n) != "passed")
    regressions = [n for n in regressions if n not in IMPROVEMENTS]
    assert not regressions, (
        f"{summary}\npass with healpy, not with skyconv substituted:\n  "
        + "\n  ".join(regressions)
        + "\n"
        + log[-6000:]
    )
