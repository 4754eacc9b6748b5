"""Before and after in one run: ``python -m bench.compare --before REV [--after-env K=V ...]``.

Judges one change by the per-phase CPU of ``bench.phases``: the driver runs alternately
against two versions of the gateway, ``--rounds`` times each, on one private Redis, in the
order before, after; after, before; ... so that the machine's drift hits both alike. The *before* side is the checkout at git revision
``--before`` (its files from ``git archive`` in a temporary directory, with this checkout's ``bench`` copied in so that
both sides are measured by the same driver, and its pinned toolchain ``.tools`` linked) or, without ``--before``, this checkout again;
``--before-env`` / ``--after-env`` add environment variables to a side (``GOMAXPROCS=1``,
``TOOLGATE_...``). The *after* side is this checkout.

Output: the table of median µs of CPU per phase of the mix for both sides and their ratio on
stderr, one JSON document on stdout (``{"before": {...}, "after": {...}, "ratio": {...}}``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.phases import PHASE_ORDER, run_in_subprocess
from bench.stack import PROJECT_ROOT, Stack


def _env_pairs(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"not KEY=VALUE: {pair!r}")
        out[key] = value
    return out


def checkout(rev: str, directory: Path) -> Path:
    """The files of ``rev`` (``git archive``) at ``directory``, with this checkout's ``bench``
    and toolchain; raises ``subprocess.CalledProcessError`` for an unknown revision."""
    directory.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(PROJECT_ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive, check=True)
    return _with_this_bench(directory)


def _with_this_bench(directory: Path) -> Path:
    """``directory`` with this checkout's ``bench`` and a link to its pinned toolchain
    (``.tools``, not in git): without ``opa`` the gateway cannot verify its policy's
    ``session_reads`` and builds the whole session on every call, which would weigh on the
    side that lacks it."""
    shutil.rmtree(directory / "bench", ignore_errors=True)
    shutil.copytree(PROJECT_ROOT / "bench", directory / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    tools = PROJECT_ROOT / ".tools"
    if tools.is_dir() and not (directory / ".tools").exists():
        (directory / ".tools").symlink_to(tools)
    return directory


def _median(results: list[dict[str, Any]]) -> dict[str, float]:
    return {phase: round(statistics.median(r["mix"][phase] for r in results), 1) for phase in PHASE_ORDER}


def compare(*, before_root: Path, before_env: dict[str, str], after_env: dict[str, str], rounds: int,
            calls: int, workdir: Path) -> dict[str, Any]:
    """Alternate the two sides ``rounds`` times; medians of the mix's per-phase µs and ratios."""
    stack = Stack(workdir / "stack")
    sides: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    try:
        stack.start_redis()
        settings = stack.settings_env()
        runs = {"before": lambda: run_in_subprocess(settings, workdir / "before", calls, source_root=before_root,
                                                    extra_env=before_env),
                "after": lambda: run_in_subprocess(settings, workdir / "after", calls, extra_env=after_env)}
        for i in range(rounds):
            # before, after; after, before; ...: neither side always runs first.
            for side in ("before", "after") if i % 2 == 0 else ("after", "before"):
                sides[side].append(runs[side]())
    finally:
        stack.stop_redis()
    before, after = _median(sides["before"]), _median(sides["after"])
    ratio = {phase: round(after[phase] / before[phase], 3) if before[phase] else None for phase in PHASE_ORDER}
    gc = {side: [r["python_gc"] for r in runs] for side, runs in sides.items()}
    return {"rounds": rounds, "calls": calls, "python_gc": gc, "before_app": sides["before"][0]["app"],
            "after_app": sides["after"][0]["app"], "before": before, "after": after, "ratio": ratio}


def format_comparison(result: dict[str, Any]) -> str:
    """The table: phase, before µs, after µs, after/before."""
    lines = [f"{'µs CPU / call (mix)':<20}{'before':>10}{'after':>10}{'ratio':>8}"]
    for phase in PHASE_ORDER:
        ratio = result["ratio"][phase]
        lines.append(f"{phase:<20}{result['before'][phase]:>10.1f}{result['after'][phase]:>10.1f}"
                     f"{'-' if ratio is None else f'{ratio:.3f}':>8}")
    for side, runs in result.get("python_gc", {}).items():
        full = [r["full_ms_each"] for r in runs]
        lines.append(f"{side}: Python full collections per run {[r['collections'][2] for r in runs]}, ms each {full}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="git revision of the before side (default: this checkout)")
    parser.add_argument("--before-dir", type=Path,
                        help="a directory with the before side's files (instead of --before), bench copied in")
    parser.add_argument("--before-env", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable of the before side (repeatable)")
    parser.add_argument("--after-env", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable of the after side (repeatable)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side, alternated (default 3)")
    parser.add_argument("--calls", type=int, default=100, help="timed calls per kind and run (default 100)")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="toolgate-compare-"))
    before_root = PROJECT_ROOT
    try:
        if args.before:
            before_root = checkout(args.before, workdir / "before-tree")
        elif args.before_dir:
            before_root = workdir / "before-tree"
            shutil.copytree(args.before_dir, before_root, ignore=shutil.ignore_patterns("__pycache__", ".venv", ".git", ".tools"))
            _with_this_bench(before_root)
        result = compare(before_root=before_root, before_env=_env_pairs(args.before_env),
                         after_env=_env_pairs(args.after_env), rounds=args.rounds, calls=args.calls, workdir=workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result["before_rev"] = args.before or (str(args.before_dir) if args.before_dir else "this checkout")
    result["before_env"], result["after_env"] = args.before_env, args.after_env
    print(format_comparison(result), file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
