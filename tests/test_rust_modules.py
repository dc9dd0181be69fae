"""The Rust crate's module structure (src/), read from the sources: no import cycle between
modules, calls only down the layers, the CPU and CUDA twins of a family independent, and cudarc
touched only by backend/.

Granularity (issue 15): a module is a file or a folder. Within each folder, its children (files,
and sub-folders taken whole) must not refer to each other in a cycle; what a child takes from its
own parent (``super::Item`` declared in ``mod.rs``) is the family shape, not a cycle. So
``sht/cuda.rs`` <-> ``sht/cuda_io.rs`` was a cycle, while ``sht/cuda/{mod.rs, io.rs, ...}`` is
one folder whose ``io.rs`` uses its parent.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from _rust_modules import graph, modules, sibling_cycles, strip

SRC = Path(__file__).resolve().parents[1] / "src"

# Cycles allowed for now, by folder. Each entry must still be a cycle (a stale one fails), so
# the change that breaks a cycle also removes its line here. Empty since the src/sht/cuda/
# folder replaced sht/cuda.rs <-> sht/cuda_io.rs.
KNOWN_CYCLES: dict[tuple[str, ...], list[set[str]]] = {}

# The layers at the crate's top, highest first: a module refers only to its own layer (without
# a cycle, as above) or to those below it.
LAYERS = {
    "py": 3,  # the pyo3 bindings
    "sht": 2,
    "smooth": 2,
    "grid": 2,
    "cube": 2,
    "healpix": 2,  # the families
    "backend": 1,  # devices, pools, transfers, NVRTC, cuFFT
    "error": 0,
    "real": 0,  # the crate's base types
}

# Files outside src/backend/ that name cudarc today (backend/ should be the only one). Each
# must still do so (a stale entry fails).
CUDARC_OUTSIDE_BACKEND = {
    "error.rs",  # From<cudarc::driver::DriverError> for Error
    "real.rs",  # Real: cudarc's DeviceRepr + ValidAsZeroBits bounds
}


def _names(m: tuple[str, ...]) -> str:
    return "::".join(m) or "crate"


@pytest.fixture(scope="module")
def crate():
    return graph(SRC)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


def test_walker_reads_uses_inline_paths_and_skips_tests_and_comments(tmp_path):
    """A small crate: every kind of path the walker must see, and the places it must not look."""
    src = _write(
        tmp_path,
        {
            "lib.rs": "pub mod a;\npub mod b;\npub mod c;\n",
            "a/mod.rs": "mod x;\nmod y;\nmod z;\npub use x::X;\npub struct P;\n",
            "a/x.rs": """
                use super::P; // the parent: not a sibling edge
                pub struct X;
                pub fn f() -> u32 { super::y::g() }
            """,
            "a/y.rs": """
                use super::{x::{self, X as Renamed}, P};
                /* use crate::c; (a comment) */
                pub fn g() -> u32 { let _ = "crate::c::h"; let _ = r#"use crate::c;"#; 1 }
                pub fn life<'a>(s: &'a str) -> char { let _ = s; '"' }
                #[cfg(test)]
                #[allow(unused)]
                mod tests {
                    use crate::c::h;
                }
            """,
            "a/z.rs": "pub fn k() { crate::b::inner::q(); }\n",
            "b/mod.rs": "pub mod inner;\nuse crate::a::{self};\n",
            "b/inner.rs": "pub fn q() {}\n",
            "c.rs": "use crate::{a::P, b::inner::*};\npub fn h() {}\n",
        },
    )
    assert set(modules(src)) == {
        (),
        ("a",),
        ("a", "x"),
        ("a", "y"),
        ("a", "z"),
        ("b",),
        ("b", "inner"),
        ("c",),
    }
    g = graph(src)
    assert g[()] == set()  # `pub mod a;` declares, it does not refer
    assert g[("a",)] == {("a", "x")}  # a child named without self::
    assert g[("a", "x")] == {("a",), ("a", "y")}
    assert g[("a", "y")] == {("a",), ("a", "x")}  # not c: comment, strings, cfg(test)
    assert g[("a", "z")] == {("b", "inner")}
    assert g[("b",)] == {("a",)}
    assert g[("c",)] == {("a",), ("b", "inner")}
    # a::z -> b::inner and b -> a: a crate-level cycle too
    assert sibling_cycles(g) == {(): [{"a", "b"}], ("a",): [{"x", "y"}]}


def test_walker_sees_a_cycle_through_subfolders(tmp_path):
    # top-level a -> b (from a leaf deep in a), b -> a (from b's mod.rs): one crate-level cycle
    src = _write(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a/mod.rs": "mod deep;\n",
            "a/deep/mod.rs": "mod leaf;\n",
            "a/deep/leaf.rs": "fn f() { super::super::super::b::g() }\n",
            "b/mod.rs": "use crate::a as other;\npub fn g() {}\n",
        },
    )
    assert sibling_cycles(graph(src)) == {(): [{"a", "b"}]}


def test_strip_keeps_offsets():
    text = "let a = \"x // y\"; // c\n/* /* nested */ */ let b = '\\n';"
    out = strip(text)
    assert len(out) == len(text) and out.count("\n") == 1
    assert out.split() == ["let", "a", "=", ";", "let", "b", "=", ";"]


def test_the_crate_is_read(crate):
    # the walker sees the real crate: its families and some edges that certainly exist
    assert len(crate) > 50
    assert ("sht",) in crate[("py", "sht")]
    assert ("backend", "cuda") in crate[("sht", "cuda")]
    assert ("sht",) in crate[("smooth",)]


def test_no_import_cycle_between_rust_modules(crate):
    cycles = sibling_cycles(crate)
    new = {
        _names(parent): [sorted(c) for c in cs if c not in KNOWN_CYCLES.get(parent, [])]
        for parent, cs in cycles.items()
    }
    new = {k: v for k, v in new.items() if v}
    assert not new, f"import cycles between Rust modules (folder: cycles): {new}"
    stale = {
        _names(parent): [sorted(c) for c in cs if c not in cycles.get(parent, [])]
        for parent, cs in KNOWN_CYCLES.items()
    }
    stale = {k: v for k, v in stale.items() if v}
    assert not stale, f"no longer cycles, remove them from KNOWN_CYCLES: {stale}"


def test_calls_go_down_the_layers(crate):
    tops = {m[0] for m in crate if m}
    assert tops <= set(LAYERS), f"give each top-level module a layer: {tops - set(LAYERS)}"
    up = sorted(
        (_names(m), _names(t))
        for m, targets in crate.items()
        if m
        for t in targets
        if t and LAYERS[t[0]] > LAYERS[m[0]]
    )
    assert not up, f"references to a higher layer: {up}"


def test_cpu_and_cuda_twins_are_independent(crate):
    # A family's cpu and cuda engines share only what their parent declares.
    pairs = sorted(
        (_names(m), _names(t))
        for m, targets in crate.items()
        for t in targets
        if m
        and len(t) >= len(m)
        and t[: len(m) - 1] == m[:-1]
        and {m[-1], t[len(m) - 1]} == {"cpu", "cuda"}
    )
    assert any(m[-1] == "cuda" for m in crate) and any(m[-1] == "cpu" for m in crate)
    assert not pairs, f"cpu and cuda modules referring to each other: {pairs}"


def test_only_backend_touches_cudarc():
    users = {
        f.relative_to(SRC).as_posix()
        for f in SRC.rglob("*.rs")
        if "cudarc" in strip(f.read_text()) and f.relative_to(SRC).parts[0] != "backend"
    }
    extra = sorted(users - CUDARC_OUTSIDE_BACKEND)
    assert not extra, f"cudarc outside src/backend/ (take it from backend::cuda): {extra}"
    stale = CUDARC_OUTSIDE_BACKEND - users
    assert not stale, f"no longer use cudarc, remove them from CUDARC_OUTSIDE_BACKEND: {stale}"
