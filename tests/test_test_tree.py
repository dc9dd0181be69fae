"""The test tree's own rules: the device axis comes from the one ``device`` fixture in
conftest.py, never from a test's own parametrisation."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_device_axis_comes_from_the_fixture():
    hand = re.compile(r"""parametrize\(\s*["'][^"']*\bdevice\b""")
    found = sorted(
        f.relative_to(TESTS).as_posix()
        for f in TESTS.rglob("test_*.py")
        if f.name != Path(__file__).name and hand.search(f.read_text())
    )
    assert not found, f"take the `device` fixture of conftest.py instead: {found}"
