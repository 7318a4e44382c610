"""``compactor plan``: a compaction plan of a snapshot or a live cluster, shown as text, JSON, markdown or a page."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from compactor.app.planning import plan_for_command
from compactor.commands.options import add_common_options, add_source_options, from_args, settings_from_args
from compactor.commands.progress import SolveProgress
from compactor.errors import EXIT_OK, CompactorError
from compactor.render.html import render_plan_html
from compactor.render.plan import render_plan
from compactor.render.run import as_deployed


def planner_overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """What ``--time-limit``, ``--max-moves``, ``--objective`` and ``--seed`` change, group -> field -> value."""
    given = (
        ("solver", "time_limit_seconds", args.time_limit),
        ("caps", "max_moves", args.max_moves),
        ("aims", "objective", args.objective),
        ("solver", "seed", args.seed),
    )
    overrides: dict[str, dict[str, Any]] = {}
    for group, name, value in given:
        if value is not None:
            overrides.setdefault(group, {})[name] = value
    if args.seed is not None:
        overrides["solver"]["deterministic"] = True  # a seed asks for the same plan again
    if args.max_moves is not None and args.objective is None:
        overrides.setdefault("aims", {})["objective"] = "max-free"  # the freest point within the cap
    return overrides


def cmd_plan(args: argparse.Namespace) -> int:
    settings = settings_from_args(args, planner_overrides(args))
    if args.seed is not None and args.seed < 0:
        raise CompactorError(f"--seed must be >= 0, got {args.seed}")
    if args.max_moves is not None and args.max_moves < 0:
        raise CompactorError(f"--max-moves must be >= 0, got {args.max_moves}")
    if args.time_limit is not None and args.time_limit <= 0:
        raise CompactorError(f"--time-limit must be > 0, got {args.time_limit}")
    if args.write:
        _check_writable(args.write)  # before planning: a plan solved for minutes must not be lost to a typo in the path
    inv = from_args(args, "plan", settings=settings)
    planned = plan_for_command(inv, explain_mig=args.explain_mig, solving=SolveProgress)
    plan = planned.plan
    if args.output == "html":  # the pictures before and after need the snapshot the plan was made on
        text = render_plan_html(plan, planned.snapshot, planned.shapes)
    elif args.output == "json":
        text = plan.to_json()
    else:
        text = render_plan(plan, args.output) + as_deployed(plan, settings, planned.window)
    if args.write:
        try:
            with open(args.write, "w", encoding="utf-8") as fh:
                fh.write(plan.to_json())
        except OSError as exc:  # e.g. the disk filled while planning: the plan still goes to stdout
            sys.stdout.write(text)
            raise CompactorError(
                f"--write {args.write}: cannot write the plan ({exc.strerror}); it was printed above"
            ) from None
    sys.stdout.write(text)
    return EXIT_OK


def _check_writable(path: str) -> None:
    """``--write PATH`` names a file that can be created or replaced: its folder exists and is writable, it is no folder."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CompactorError(f"--write {path}: is a directory; name a file, e.g. {os.path.join(path, 'plan.json')}")
    if not os.path.isdir(folder):
        raise CompactorError(f"--write {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise CompactorError(f"--write {path}: not writable")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plan = commands.add_parser("plan", help="compute a compaction plan (dry run: changes nothing)")
    add_source_options(plan)
    add_common_options(plan)
    plan.add_argument("--output", "-o", choices=("text", "json", "markdown", "html"), default="text")
    plan.add_argument("--write", metavar="FILE", help="also write the plan as JSON to FILE (for compactor apply)")
    plan.add_argument("--time-limit", type=float, metavar="SECONDS", help="solver time limit (default from config: 10)")
    plan.add_argument(
        "--max-moves",
        type=int,
        metavar="N",
        help="at most N moves: the point of the curve freeing the most within N (unless --objective says otherwise)",
    )
    plan.add_argument(
        "--explain-mig",
        action="store_true",
        help="also say, per MIG pool, which named mig-parted layout would serve "
        "the demand best (advice: nothing is re-cut)",
    )
    plan.add_argument(
        "--objective",
        choices=("pending-only", "balanced", "max-free"),
        help="which point of the trade-off curve to plan (default from config: balanced)",
    )
    plan.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="CP-SAT seed; implies solver.deterministic: the same snapshot, settings and seed give the same plan",
    )
    plan.add_argument("--shape", action="append", metavar="RES=QTY,...", help="reference request shape for the figures")
    plan.add_argument("--pool-label", metavar="LABEL", help="node label that groups nodes into pools")
    plan.set_defaults(handler=cmd_plan)
