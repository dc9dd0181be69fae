"""Options every verb shares and the one place they are resolved.

- ``--device {auto,cpu,cuda,cuda:N}``: one default for every verb: not given → the
  ``SKYCONV_DEVICE`` environment variable → ``auto`` (the GPU when one works, else the CPU):
  skyconv's one device rule (``skyconv._utils.device``), applied once before any work by
  :func:`resolve_device`; the resolved device is what the verbs pass down.
- ``--threads N``: CPU threads for this run (``skyconv.set_num_threads``).
- ``--quiet``/``-q``: no progress messages on stderr (:class:`Progress`).
- ``--out``/``-o PATH`` and ``--overwrite``: the output convention (:func:`add_output`,
  :func:`output_path`); outputs are checked before any work by ``_io.check_output``.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time

import numpy as np

from ._errors import UsageError

DEVICES = ("auto", "cpu", "cuda", "cuda:N")
DEVICE_ENV = "SKYCONV_DEVICE"
#: Seconds between a long stage's "still running" lines.
TICK = 10.0


def device_name(text: str) -> str:
    """argparse type of ``--device``: ``auto``, ``cpu``, ``cuda`` (or ``gpu``) or ``cuda:N``,
    any case; the names of skyconv's one device rule (``skyconv._utils.device``), checked
    here for spelling only (whether the GPU works is :func:`resolve_device`'s to say)."""
    from .._utils.device import _gpu_index

    name = str(text).strip().lower()
    if name in ("auto", "cpu"):
        return name
    try:
        _gpu_index(name, "--device")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return name


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def add_common(
    p: argparse.ArgumentParser,
    *,
    device: bool = True,
    threads: bool = True,
    device_type=device_name,
    device_help: str | None = None,
) -> None:
    """Add ``--device`` (default None: see :func:`resolve_device`), ``--threads`` and
    ``--quiet`` to a verb's parser."""
    if device:
        p.add_argument(
            "--device",
            type=device_type,
            default=None,
            metavar="{auto,cpu,cuda,cuda:N}",
            help=device_help
            or f"where to compute (default: ${DEVICE_ENV}, else auto: the GPU when one works, "
            "else the CPU)",
        )
    if threads:
        p.add_argument(
            "--threads", type=positive_int, default=None, help="CPU threads (default: all cores)"
        )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")


def verb_parser(subparsers, name: str, help: str, doc: str | None) -> argparse.ArgumentParser:
    """Add verb ``name`` to ``subparsers``: ``help`` is its line in ``skyconv --help``, ``doc``
    (the verb module's docstring) its description, printed as written.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers`` returned.
    name, help : str
        The verb and its one-line help.
    doc : str or None
        The verb's description (its module's ``__doc__``).

    Returns
    -------
    argparse.ArgumentParser
        The verb's parser, for its own arguments.
    """
    return subparsers.add_parser(
        name,
        help=help,
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def before_work(args: argparse.Namespace, outputs, inputs):
    """The checks every verb makes before any work, in this order: each output absent unless
    ``--overwrite``; each input present; no output one of the inputs; then the device resolved
    (:func:`resolve_device`) and ``--threads`` applied (:func:`apply_threads`).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments with ``overwrite``, ``device`` and ``threads``.
    outputs, inputs : sequence of (path or None, option)
        The files to write and to read, each with the option that names it in messages
        (``"--out"``, ``"input"``, ...); a None path is not checked.

    Returns
    -------
    device : skyconv._utils.device.Device
        The ``device`` argument for the skyconv functions.
    where : str
        Where the work will run, for messages.

    Raises
    ------
    OutputExistsError, UsageError
        An output exists without ``--overwrite``, an input is missing or is an output (exit
        status 2).
    skyconv.DeviceError
        A GPU was asked for and none works (exit status 1).
    """
    from . import _io

    for path, option in outputs:
        _io.check_output(path, args.overwrite, option)
    for path, option in inputs:
        if path is not None:
            _io.check_input(path, option)
    _io.check_distinct([p for p, _ in outputs], [p for p, _ in inputs])
    device, where = resolve_device(args)
    apply_threads(args)
    return device, where


def resolve_device(args: argparse.Namespace):
    """Resolve the device once, before any work, with skyconv's one device rule.

    ``--device`` (None when not given: then ``SKYCONV_DEVICE``, else ``auto``) becomes a
    ``skyconv._utils.device.Device``, which the verbs pass down: the functions take it as it
    is and never resolve again (``auto`` stays marked as chosen by ``auto``, so a function that
    can spread work over the GPU and the CPU, as smoothing's split method does, may). A bad
    ``SKYCONV_DEVICE`` or a GPU that does not work is so reported before any file is read.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments with ``device`` (a name or None).

    Returns
    -------
    device : skyconv._utils.device.Device
        The ``device`` argument for the skyconv functions.
    where : str
        Where the work will run, for messages: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Raises
    ------
    UsageError
        ``SKYCONV_DEVICE`` is not a device name (exit status 2).
    skyconv.DeviceError
        A GPU was asked for and none works (exit status 1).
    """
    from .._utils.device import resolve

    device = getattr(args, "device", None)
    try:
        dev = resolve(device)
    except ValueError as e:
        if device is None:
            raise UsageError(str(e)) from None
        raise
    return dev, str(dev)


def apply_threads(args: argparse.Namespace) -> None:
    """Set the CPU thread count from ``--threads`` (if given)."""
    n = getattr(args, "threads", None)
    if n is not None:
        import skyconv

        skyconv.set_num_threads(n)


def add_output(
    p: argparse.ArgumentParser, what: str, *, required: bool = True, positional: bool = False
) -> None:
    """Add ``--out``/``-o PATH`` and ``--overwrite``.

    ``positional=True`` also accepts the output as a second positional argument, the form these
    verbs took before ``--out`` (deprecated: a note on stderr says so).
    """
    if positional:
        p.add_argument("output", nargs="?", default=None, help=argparse.SUPPRESS)
    p.add_argument(
        "--out",
        "-o",
        dest="out",
        metavar="PATH",
        default=None,
        required=required and not positional,
        help=what,
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace existing output files (checked first)"
    )


def output_path(args: argparse.Namespace, verb: str) -> str | None:
    """The output path from ``--out`` or the deprecated positional form.

    Raises
    ------
    UsageError
        Both forms given, or neither where an output is required.
    """
    out = getattr(args, "out", None)
    old = getattr(args, "output", None)
    if old is not None:
        if out is not None:
            raise UsageError(f"give the output once: --out {out} or {old}, not both")
        print(
            f"skyconv {verb}: note: the output as a positional argument is deprecated; "
            f"write --out {old}",
            file=sys.stderr,
            flush=True,
        )
        return old
    if out is None and hasattr(args, "output"):
        raise UsageError(f"skyconv {verb}: give the output file with --out PATH")
    return out


_UNITS = {
    "arcmin": np.pi / 180 / 60,
    "amin": np.pi / 180 / 60,
    "'": np.pi / 180 / 60,
    "arcsec": np.pi / 180 / 3600,
    "asec": np.pi / 180 / 3600,
    '"': np.pi / 180 / 3600,
    "deg": np.pi / 180,
    "d": np.pi / 180,
    "rad": 1.0,
}


class Angle(float):
    """An angle in radians read from the command line; ``bare`` is True when it was written
    without a unit (and read in the option's default unit). ``to(unit)`` gives the number in
    another unit, exactly the number written when that is the unit it was written in."""

    bare: bool = False
    text: str = ""
    number: float = 0.0
    unit: str = "rad"

    def to(self, unit: str) -> float:
        """The angle in ``unit`` (arcmin, arcsec, deg or rad)."""
        if _UNITS[unit] == _UNITS[self.unit]:
            return self.number
        return float(self) / _UNITS[unit]


def parse_angle(text: str, default_unit: str = "arcmin") -> Angle:
    """An angle with a unit (arcmin, arcsec, deg, rad) in radians.

    Parameters
    ----------
    text : str
        A number followed by a unit, e.g. ``"5arcmin"``, ``"0.5 deg"``, ``"1e-3rad"``. A bare
        number is read in ``default_unit`` (and flagged: ``Angle.bare``).
    default_unit : str
        The unit of a bare number.

    Returns
    -------
    Angle
        The angle in radians (a float).

    Raises
    ------
    argparse.ArgumentTypeError
        The text is not a number with a known unit.
    """
    m = re.fullmatch(r"\s*([-+0-9.eE]+)\s*([a-zA-Z'\"]*)\s*", text)
    unit = m.group(2).lower() if m is not None else None
    if m is None or (unit and unit not in _UNITS):
        raise argparse.ArgumentTypeError(
            f"cannot read the angle {text!r}: give a number and arcmin, arcsec, deg or rad"
        )
    try:
        value = float(m.group(1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"cannot read the angle {text!r}") from None
    out = Angle(value * _UNITS[unit or default_unit])
    out.number, out.unit = value, unit or default_unit
    out.bare = not unit
    out.text = text.strip()
    return out


def angle_type(default_unit: str):
    """argparse type: :func:`parse_angle` with ``default_unit`` for bare numbers."""

    def parse(text: str) -> Angle:
        return parse_angle(text, default_unit)

    parse.__name__ = f"angle ({default_unit} if bare)"
    return parse


class Progress:
    """Progress messages on stderr (nothing with ``quiet``): lines, timed stages and a bar.

    Parameters
    ----------
    verb : str
        The verb's name, at the start of each message.
    quiet : bool
        Print nothing.
    stream : file, optional
        Where to print (default ``sys.stderr``).
    tick : float, optional
        Seconds between the "still running" lines a :meth:`stage` prints while its work (one
        skyconv call that reports no progress of its own) goes on (default :data:`TICK`).
    """

    def __init__(self, verb: str, quiet: bool = False, stream=None, tick: float | None = None):
        self.verb = verb
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.tick = TICK if tick is None else tick
        self.t0 = time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since this printer was made."""
        return time.perf_counter() - self.t0

    def say(self, msg: str) -> None:
        """One line on stderr."""
        if not self.quiet:
            print(msg, file=self.stream, flush=True)

    def note_bare(self, option: str, value, unit: str) -> None:
        """Say how a bare number given to ``option`` was read."""
        if isinstance(value, Angle) and value.bare:
            self.say(f"skyconv {self.verb}: {option} {value.text} read as {value.text} {unit}")

    def stage(self, what: str):
        """Context manager: ``what ...`` before, ``what: still running, N s`` every
        ``tick`` seconds meanwhile (from a background thread: the skyconv functions release
        the GIL), ``what: N.NN s`` after."""
        return _Stage(self, what)

    def bar(self, done: int, total: int, label: str, extra: str = "") -> None:
        """A one-line bar, redrawn in place; ends the line when ``done == total``."""
        if self.quiet:
            return
        width = 30
        fill = int(width * done / max(total, 1))
        self.stream.write(
            f"\r{self.verb} [{'#' * fill}{'.' * (width - fill)}] {done}/{total} {label}"
            f"{extra}  {self.elapsed():.1f} s"
        )
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


class _Stage:
    def __init__(self, progress: Progress, what: str):
        self.progress, self.what = progress, what
        self.done = threading.Event()
        self.thread = None

    def __enter__(self):
        self.t = time.perf_counter()
        self.progress.say(f"{self.progress.verb}: {self.what} ...")
        if not self.progress.quiet and self.progress.tick > 0:
            self.thread = threading.Thread(target=self._ticker, daemon=True)
            self.thread.start()
        return self

    def _ticker(self):
        while not self.done.wait(self.progress.tick):
            dt = time.perf_counter() - self.t
            self.progress.say(f"{self.progress.verb}: {self.what}: still running, {dt:.0f} s")

    def __exit__(self, *exc):
        self.done.set()
        if self.thread is not None:
            self.thread.join()
        if exc[0] is None:
            dt = time.perf_counter() - self.t
            self.progress.say(f"{self.progress.verb}: {self.what}: {dt:.2f} s")
        return False


__all__ = [
    "DEVICES",
    "Angle",
    "Progress",
    "add_common",
    "add_output",
    "angle_type",
    "apply_threads",
    "device_name",
    "output_path",
    "parse_angle",
    "positive_int",
    "resolve_device",
]
