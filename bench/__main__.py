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
        help="folder for <machine>.json (default: bench/results; with --compare a temporary "
        "folder, so the committed file is not touched)",
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
    p.add_argument(
        "--compare",
        metavar="FILE",
        type=Path,
        help="rerun the cases measured in FILE (a bench/results/*.json) with its size setting "
        "and print new/old per case; --cases and --engines narrow them",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=None,
        help="with --compare: relative slowdown of skyconv's end-to-end median marked as a "
        "regression (default 0.10)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="with --compare: exit status 3 when a regression is found",
    )
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
    if args.compare is None:
        if args.tolerance is not None or args.strict:
            print("--tolerance and --strict need --compare", file=sys.stderr)
            return 2
        out = args.out or RESULTS
        _, _, errors = runner.run(
            args.cases,
            args.quick,
            args.machine,
            out,
            _settings(args, args.quick),
            engines,
            fresh=args.fresh,
            threads=args.threads,
        )
        return 1 if errors else 0
    return _compare(args, engines)


RESULTS = Path(__file__).resolve().parent / "results"


def _settings(args: argparse.Namespace, quick: bool) -> Settings:
    return Settings(
        quick=quick,
        warmup=args.warmup,
        repeats=args.repeats or (3 if quick else 5),
        min_time=0.02 if quick else 0.5,
        budget=args.budget or (5.0 if quick else 60.0),
    )


def _compare(args: argparse.Namespace, engines: set[str]) -> int:
    """``--compare FILE``: rerun FILE's cases, print new/old; 1 on errors, 3 on regressions
    with ``--strict``."""
    import tempfile

    from . import compare, runner

    tolerance = compare.DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    if not tolerance >= 0:
        print(f"--tolerance must be >= 0, got {tolerance}", file=sys.stderr)
        return 2
    old = compare.load(args.compare)
    plan = compare.plan(old)
    if args.quick and not plan.quick:
        print("--quick cannot rerun a full-size result file", file=sys.stderr)
        return 2
    run_engines = engines & plan.engines
    if not run_engines:
        print(f"{args.compare} has no measurement on engine(s) {sorted(engines)}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="skyconv-bench-") as tmp:
        new, _, errors = runner.run(
            args.cases,
            plan.quick,
            args.machine,
            args.out or Path(tmp),
            _settings(args, plan.quick),
            run_engines,
            fresh=args.fresh,
            threads=args.threads,
            names=plan.cases,
        )
    rows = compare.compare(old, new, tolerance)
    print(f"\ncompared with {args.compare} (tolerance {tolerance:.0%}):")
    print(compare.table(rows, plan.machine, new.get("machine")))
    if errors:
        return 1
    return 3 if args.strict and compare.regressions(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
