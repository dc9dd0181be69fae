"""Command line: ``python -m bench [--cases PATTERN] [--quick] [--machine NAME] [--out DIR]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .harness import Settings


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command-line options (see ``python -m bench --help``)."""
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Time skyconv against the tools it replaces; write <out>/<machine>.json.",
    )
    p.add_argument(
        "--cases",
        metavar="PATTERN",
        help="comma-separated substrings or globs of case names, e.g. 'filters', "
        "'filters.gauss*,sht' (default: all)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="small inputs and few repeats: the whole run takes seconds",
    )
    p.add_argument(
        "--machine",
        metavar="NAME",
        help="name of the results file (default: from hostname, CPU count, GPU)",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        default=Path(__file__).resolve().parent / "results",
        help="folder for <machine>.json (default: bench/results)",
    )
    p.add_argument(
        "--engines",
        default="cpu,gpu",
        help="comma-separated engines to run: cpu, gpu (default: both)",
    )
    p.add_argument("--repeats", type=int, help="timed calls per measurement (default 5, quick 3)")
    p.add_argument("--warmup", type=int, default=1, help="untimed calls first (default 1)")
    p.add_argument(
        "--budget",
        type=float,
        help="seconds after which a measurement stops repeating (default 60)",
    )
    p.add_argument("--threads", type=int, help="skyconv.set_num_threads before running")
    p.add_argument(
        "--fresh", action="store_true", help="overwrite the results file instead of merging into it"
    )
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit status 1 when a measurement failed (skips are not failures)."""
    args = parse_args(argv)
    from . import runner

    if args.list:
        for case in runner.select(args.cases):
            print(f"{case.name:<28} {case.description}")
        return 0
    engines = {e.strip() for e in args.engines.split(",") if e.strip()}
    unknown = engines - {"cpu", "gpu"}
    if unknown:
        print(f"unknown engine(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    settings = Settings(
        quick=args.quick,
        warmup=args.warmup,
        repeats=args.repeats or (3 if args.quick else 5),
        min_time=0.02 if args.quick else 0.5,
        budget=args.budget or (5.0 if args.quick else 60.0),
    )
    _, _, errors = runner.run(
        args.cases,
        args.quick,
        args.machine,
        args.out,
        settings,
        engines,
        fresh=args.fresh,
        threads=args.threads,
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
