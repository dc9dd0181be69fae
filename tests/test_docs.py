"""Docstrings (issue 15): numpydoc sections on every public function of the families' modules,
their ``Examples`` run as doctests (on the CPU, about a second each), and the README's API
section checked against the package."""

from __future__ import annotations

import ast
import doctest
import importlib
import inspect
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import skyconv

#: The modules whose public functions carry numpydoc docstrings with a doctested example.
MODULES = [
    "skyconv",
    "skyconv._backend",  # public as skyconv.backend
    "skyconv.filters",
    "skyconv.grid",
    "skyconv.healpix",
    "skyconv.sht",
    "skyconv.sht_halves",
    "skyconv.smooth.api",
    "skyconv.smooth.methods",
    "skyconv.smooth.split",
    "skyconv.stats",
]

README = Path(__file__).resolve().parents[1] / "README.md"


def _public(mod):
    """(name, object) of the public functions and classes defined in ``mod`` (its
    ``__all__``), re-exports from elsewhere left to their own module."""
    out = []
    for name in getattr(mod, "__all__", []):
        obj = getattr(mod, name)
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == mod.__name__:
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                continue
            out.append((name, obj))
    return out


@pytest.mark.parametrize("module", MODULES)
def test_doctests_pass(module, monkeypatch):
    monkeypatch.delenv("SKYCONV_DEVICE", raising=False)
    mod = importlib.import_module(module)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(mod, module) if t.examples]
    out: list[str] = []
    for t in tests:
        runner.run(t, out=out.append)
    assert runner.failures == 0, "".join(out)
    public = [name for name, _ in _public(mod)]
    if public or module == "skyconv":
        assert runner.tries > 0


@pytest.mark.parametrize("module", MODULES[1:])
def test_public_functions_have_numpydoc_sections(module):
    mod = importlib.import_module(module)
    missing = []
    for name, obj in _public(mod):
        doc = inspect.getdoc(obj) or ""
        need = ["Examples"]
        if inspect.isfunction(obj):
            sig = inspect.signature(obj)
            if sig.parameters:
                need.append("Parameters")
            if sig.return_annotation not in (None, "None"):
                need.append("Returns")
        for section in need:
            if not re.search(rf"^{section}\n-{{{len(section)}}}$", doc, re.M):
                missing.append(f"{name}: {section}")
        if ">>>" not in doc:
            missing.append(f"{name}: no doctest")
    assert not missing, missing


def test_the_doctest_check_can_fail():
    """A docstring with a wrong example fails the runner used above."""

    def bad():
        """
        >>> 1 + 1
        3
        """

    runner = doctest.DocTestRunner()
    for t in doctest.DocTestFinder().find(bad, "bad"):
        runner.run(t, out=lambda s: None)
    assert runner.failures == 1


# ----------------------------------------------------------------------------------------------
# The README's API section


def _api_section() -> str:
    text = README.read_text()
    m = re.search(r"^## API\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, "README.md has no '## API' section"
    return m.group(1)


def _resolve(dotted: str):
    obj = skyconv
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def _signatures(section: str):
    """(dotted name, ast.arguments) of every ``skyconv.x(...)`` signature in backticks."""
    out = []
    for sig in re.findall(r"`(skyconv\.[\w.]+\([^`]*\))`", section):
        name = sig[: sig.index("(")]
        tree = ast.parse(f"def f{sig[len(name) :]}: pass")
        out.append((name, tree.body[0].args))
    return out


def _shown(args: ast.arguments):
    """[(name, kind, default source or None)] of a parsed signature."""
    rows = []
    pos = args.posonlyargs + args.args
    defaults = [None] * (len(pos) - len(args.defaults)) + list(args.defaults)
    for a, d in zip(pos, defaults):
        rows.append((a.arg, "POSITIONAL_OR_KEYWORD", d))
    if args.vararg:
        rows.append((args.vararg.arg, "VAR_POSITIONAL", None))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        rows.append((a.arg, "KEYWORD_ONLY", d))
    if args.kwarg:
        rows.append((args.kwarg.arg, "VAR_KEYWORD", None))
    return rows


def test_readme_api_signatures_match_the_package():
    section = _api_section()
    sigs = _signatures(section)
    assert len(sigs) >= 20, "the API section lists the public functions"
    problems = []
    for name, args in sigs:
        try:
            obj = _resolve(name)
        except AttributeError:
            problems.append(f"{name}: no such name")
            continue
        params = [
            p
            for p in inspect.signature(obj).parameters.values()
            if not p.name.startswith("_")  # private keyword-only knobs
        ]
        shown = _shown(args)
        if [(n, k) for n, k, _ in shown] != [(p.name, p.kind.name) for p in params]:
            problems.append(f"{name}: README shows {[n for n, _, _ in shown]}, "
                            f"the package has {[p.name for p in params]}")  # fmt: skip
            continue
        for (n, _, d), p in zip(shown, params):
            want = p.default
            if d is None:
                if want is not inspect.Parameter.empty:
                    problems.append(f"{name}: {n} has a default ({want!r}) the README omits")
                continue
            got = eval(compile(ast.Expression(d), "<readme>", "eval"), {"np": np})
            if not (got == want or (got is want)):
                problems.append(f"{name}: {n}={ast.unparse(d)} in README, {want!r} in skyconv")
    assert not problems, problems


def test_readme_api_covers_the_public_functions():
    listed = {name for name, _ in _signatures(_api_section())}
    want = set()
    for name in skyconv.__all__:
        obj = getattr(skyconv, name)
        if inspect.isfunction(obj):
            want.add(f"skyconv.{name}")
    for module in ("filters", "healpix"):
        mod = getattr(skyconv, module)
        want |= {f"skyconv.{module}.{n}" for n, o in _public(mod) if inspect.isfunction(o)}
    want |= {"skyconv.Gridder", "skyconv.HealpixTarget", "skyconv.Sightlines"}
    assert not want - listed, sorted(want - listed)


def test_readme_examples_call_what_exists():
    """Every skyconv call in the README's code blocks names something that exists and passes
    only keywords it accepts."""
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    problems = []
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if not isinstance(node, ast.Call):
                continue
            dotted = ast.unparse(node.func)
            if not dotted.startswith("skyconv."):
                continue
            try:
                obj = _resolve(dotted)
            except AttributeError:
                problems.append(f"{dotted}: no such name")
                continue
            params = inspect.signature(obj).parameters
            for kw in node.keywords:
                if kw.arg and kw.arg not in params:
                    problems.append(f"{dotted}: no keyword {kw.arg}")
    assert not problems, problems


def test_readme_check_can_fail(monkeypatch, tmp_path):
    fake = tmp_path / "README.md"
    fake.write_text("## API\n\n`skyconv.smooth_map(m, fwhm=None, device='auto')`\n\n## End\n")
    monkeypatch.setattr(sys.modules[__name__], "README", fake)
    with pytest.raises(AssertionError):
        test_readme_api_signatures_match_the_package()
