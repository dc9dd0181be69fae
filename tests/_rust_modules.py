"""The module graph of a Rust crate, read from its sources (no compiler): which module refers
to which, through ``use`` trees and inline ``crate::``/``super::``/``self::`` paths.

A module is a file (``a/b.rs`` is ``a::b``; ``a/mod.rs`` and ``lib.rs`` are the folder's own
module). Code under ``#[cfg(test)]`` is left out: unit tests may reach anywhere. Comments and
string or char literals are blanked before the paths are read. Used by test_rust_modules.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

Mod = tuple[str, ...]  # ("sht", "cuda_io"); () is the crate root

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_CFG_TEST = re.compile(r"#\[cfg\((?:all\()?test\b")
_ATTR = re.compile(r"\s*#!?\[")
_INLINE_MOD = re.compile(rf"\bmod\s+({_IDENT})\s*\{{")
_USE = re.compile(r"\buse\s+([^;]*);")
_PATH = re.compile(rf"\b(?:crate|super|self)(?:\s*::\s*{_IDENT})+")


def modules(src: Path) -> dict[Mod, Path]:
    """Every module of the crate rooted at ``src`` (``src/lib.rs``), by path, with its file."""
    out: dict[Mod, Path] = {}
    for f in sorted(src.rglob("*.rs")):
        parts = f.relative_to(src).with_suffix("").parts
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        out[tuple(parts)] = f
    return out


def strip(text: str) -> str:
    """Comments, string and char literals replaced by spaces (offsets and newlines kept)."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif m := re.compile(r'b?r(#*)"').match(text, i):
            if i and (text[i - 1].isalnum() or text[i - 1] == "_"):
                i += 1
                continue
            end = text.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            blank(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif m := re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'])'").match(
            text, i
        ):
            blank(i, m.end())
            i = m.end()
        else:
            i += 1
    return "".join(out)


def _item_end(text: str, i: int) -> int:
    """The end of the item that starts at ``i`` (after its attributes): its ``;`` or ``}``."""
    while m := _ATTR.match(text, i):
        i = _close(text, m.end() - 1, "[", "]")
    semi, brace = text.find(";", i), text.find("{", i)
    if brace < 0 or 0 <= semi < brace:
        return semi + 1
    return _close(text, brace, "{", "}")


def _close(text: str, i: int, open_: str, close: str) -> int:
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_:
            depth += 1
        elif text[j] == close:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def drop_cfg_test(text: str) -> str:
    """The items under ``#[cfg(test)]`` (and ``#[cfg(all(test, ...))]``) blanked out."""
    while m := _CFG_TEST.search(text):
        end = _item_end(text, _close(text, m.start() + 1, "[", "]"))
        text = text[: m.start()] + re.sub(r"[^\n]", " ", text[m.start() : end]) + text[end:]
    return text


def use_paths(tree: str) -> list[list[str]]:
    """The paths of one ``use`` tree: ``a::{b, c::{self, d as e, *}}`` gives a::b, a::c,
    a::c::d (a glob names its module; an alias is dropped)."""
    tree = re.sub(rf"\s+as\s+{_IDENT}", "", tree)
    tree = re.sub(r"\s+", "", tree)

    def expand(s: str) -> list[list[str]]:
        k = s.find("{")
        if k < 0:
            segs = [p for p in s.split("::") if p and p not in ("*", "self")]
            return [segs] if segs else []
        head = [p for p in s[:k].split("::") if p]
        inner = s[k + 1 : _close(s, k, "{", "}") - 1]
        parts, depth, start = [], 0, 0
        for j, ch in enumerate(inner):
            depth += ch == "{"
            depth -= ch == "}"
            if ch == "," and depth == 0:
                parts.append(inner[start:j])
                start = j + 1
        parts.append(inner[start:])
        out = [head + tail for p in parts for tail in expand(p)]
        return out + [head] if any(p in ("self", "*") for p in parts) or not out else out

    return expand(tree)


def references(text: str, here: Mod, mods: Iterable[Mod]) -> set[Mod]:
    """The modules of ``mods`` that the module ``here`` (source ``text``) refers to."""
    known = set(mods)
    code = drop_cfg_test(strip(text))
    # inline (non-test) modules: `super` inside one means the file's module
    spans = [
        (m.start(), _close(code, m.end() - 1, "{", "}"), m.group(1))
        for m in _INLINE_MOD.finditer(code)
    ]

    def scope(pos: int) -> Mod:
        return here + tuple(name for a, b, name in spans if a <= pos < b)

    paths: list[tuple[int, list[str]]] = []
    for m in _USE.finditer(code):
        paths += [(m.start(), p) for p in use_paths(m.group(1))]
    for m in _PATH.finditer(code):
        paths.append((m.start(), re.sub(r"\s+", "", m.group(0)).split("::")))
    out: set[Mod] = set()
    for pos, segs in paths:
        target = resolve(segs, scope(pos), known)
        if target is not None:
            out.add(target)
    return out


def resolve(segs: list[str], here: Mod, known: set[Mod]) -> Mod | None:
    """The module that the path ``segs`` (used in module ``here``) lands in, or None when it
    leaves the crate (std, pyo3, ...)."""
    if not segs:
        return None
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base, rest = here, segs
        while rest and rest[0] in ("super", "self"):
            base = base[:-1] if rest[0] == "super" else base
            rest = rest[1:]
    elif here + (segs[0],) in known:  # a child module named without `self::`
        base, rest = here, segs
    else:
        return None
    while base not in known and base:  # inline modules are part of their file's module
        base = base[:-1]
    for s in rest:
        if base + (s,) in known:
            base = base + (s,)
        else:
            break
    return base


def graph(src: Path) -> dict[Mod, set[Mod]]:
    """Module → the other modules it refers to, for the crate at ``src``."""
    mods = modules(src)
    return {m: references(f.read_text(), m, mods) - {m} for m, f in mods.items()}


def sibling_cycles(g: dict[Mod, set[Mod]]) -> dict[Mod, list[set[str]]]:
    """The import cycles among the children of each folder module: folder → its cycles, each
    the set of child names. A child stands for its whole subtree (a folder is one node); what a
    child takes from its parent (``super::Item`` declared in mod.rs) is the family shape, not a
    cycle, so the parent's own file is no node."""
    out: dict[Mod, list[set[str]]] = {}
    parents = {m[:-1] for m in g if m}
    for parent in sorted(parents):
        depth = len(parent)
        edges: dict[str, set[str]] = {}
        for m, targets in g.items():
            if len(m) <= depth or m[:depth] != parent:
                continue
            a = m[depth]
            edges.setdefault(a, set())
            for t in targets:
                if len(t) > depth and t[:depth] == parent and t[depth] != a:
                    edges[a].add(t[depth])
        cycles = [c for c in strongly_connected(edges) if len(c) > 1]
        if cycles:
            out[parent] = cycles
    return out


def strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of a small directed graph."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            comps.append(comp)

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return comps
