"""The `skyconv` console script: `skyconv info`, `skyconv demo`, and one subcommand per family."""

from __future__ import annotations

import argparse
import json
import sys


def _info(args) -> int:
    from . import backend_info

    print(json.dumps(backend_info(), indent=2))
    return 0


def _demo(args) -> int:
    from . import _demo

    devices = None if args.device == "all" else [args.device]
    _demo.run(devices)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="skyconv", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "info", help="print backend information (CPU threads, GPU, CUDA versions)"
    ).set_defaults(func=_info)
    d = sub.add_parser(
        "demo", help="run every function on synthetic data and compare with the reference libraries"
    )
    d.add_argument(
        "--device",
        default="all",
        choices=["all", "cpu", "cuda"],
        help="device(s) to run on (default: CPU, and the GPU if one works)",
    )
    d.set_defaults(func=_demo)
    # One subcommand per family; each module adds its parser and sets func.
    from . import _cli_atrous, _cli_cube, _cli_grid, _cli_sht, _cli_smooth

    _cli_sht.add_parser(sub)
    _cli_smooth.add_parser(sub)
    _cli_grid.add_parser(sub)
    _cli_cube.add_scfind_parser(sub)
    _cli_atrous.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from ._errors import SkyconvError

    try:
        return int(args.func(args) or 0)
    except (SkyconvError, ValueError, TypeError, OSError) as e:
        print(f"skyconv {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
