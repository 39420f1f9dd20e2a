"""Before and after, side by side: runs benchmarks in two trees of ipydevice, alternately.

Usage::

    python benchmarks/compare.py --baseline 2c78187            # error and load, 3 rounds
    python benchmarks/compare.py --baseline v0.3 error --rounds 5
    python benchmarks/compare.py --baseline HEAD~4 --write     # and add the table to RESULTS.md
    python benchmarks/compare.py --baseline 2c78187 --after 51bc45b   # two commits

The baseline (and ``--after``, when given; else the working tree) is checked out with
``git worktree add --detach`` into a temporary folder and removed afterwards. Each round runs each benchmark once in each tree (the order
alternates from round to round, ABBA), every run in a fresh interpreter with that tree
first on ``sys.path``, so both arms see the same machine load. Each benchmark's own
script from its own tree is used: a benchmark whose setup changed between the trees
is still compared on the figures both report. The verdict is the median over rounds
of the per-round ratio after/before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS_MD = os.path.join(HERE, "RESULTS.md")
START, END = "<!-- compare:{}:start -->", "<!-- compare:{}:end -->"

#: The figures compared for each benchmark (lower is better for all of them).
FIGURES = {
    "error": ("ipydevice_added_best_ms", "ipydevice_added_ms", "diagnose_ms", "widget_ms"),
    "load": ("first_load_ms", "again_ms"),
    "devices": ("devices_100000_ms", "devices_1000_ms"),
    "memory": ("peak_rise_mb", "diagnose_and_render_ms"),
}


def run_bench(tree: str, name: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("IPYDEVICE_DEBUG", "PYTHONPATH")}
    env["PYTHONPATH"] = tree
    done = subprocess.run(
        [sys.executable, os.path.join(tree, "benchmarks", f"bench_{name}.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        timeout=900,
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise SystemExit(f"bench_{name}.py failed in {tree}: {tail}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])["figures"]
    return figures


def compare(before: str, after: str, names: list[str], rounds: int) -> list[dict[str, Any]]:
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for index in range(rounds):
        arms = [("before", before), ("after", after)]
        if index % 2:
            arms.reverse()
        for name in names:
            for arm, tree in arms:
                print(f"round {index + 1}/{rounds}: {name} {arm}", file=sys.stderr, flush=True)
                runs.setdefault((name, arm), []).append(run_bench(tree, name))
    rows = []
    for name in names:
        for figure in FIGURES[name]:
            pairs = [
                (b.get(figure), a.get(figure))
                for b, a in zip(runs[(name, "before")], runs[(name, "after")], strict=True)
            ]
            pairs = [
                (b, a)
                for b, a in pairs
                if isinstance(b, int | float) and isinstance(a, int | float)
            ]
            if not pairs:
                continue
            ratios = [a / b for b, a in pairs if b]
            rows.append(
                {
                    "benchmark": name,
                    "figure": figure,
                    "before": statistics.median(b for b, _ in pairs),
                    "after": statistics.median(a for _, a in pairs),
                    "ratio": statistics.median(ratios) if ratios else float("nan"),
                    "ratios": [round(r, 3) for r in ratios],
                }
            )
    return rows


def markdown(
    rows: list[dict[str, Any]],
    before_ref: str,
    after_ref: str,
    rounds: int,
    command: str,
    label: str,
) -> str:
    out = [
        START.format(label),
        "",
        f"Compared {time.strftime('%Y-%m-%d')}: `{before_ref}` (before) against `{after_ref}` "
        f"(after), {rounds} alternating rounds in one run (`python benchmarks/compare.py "
        f"{command}`). Medians over rounds; the ratio is the median of the "
        "per-round ratios after/before (below 1.00: faster after).",
        "",
        "| benchmark | figure | before | after | ratio after/before | per round |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['benchmark']} | `{r['figure']}` | {r['before']:.3g} | {r['after']:.3g} "
            f"| {r['ratio']:.2f} | {', '.join(f'{x:.2f}' for x in r['ratios'])} |"
        )
    out += ["", END.format(label)]
    return "\n".join(out)


def write_markdown(section: str, label: str) -> None:
    with open(RESULTS_MD) as handle:
        text = handle.read()
    start, end = START.format(label), END.format(label)
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + f"\n\n### Before and after: {label}\n\n" + section + "\n"
    with open(RESULTS_MD, "w") as handle:
        handle.write(text)


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", ROOT, *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", help=f"some of: {', '.join(FIGURES)} (default: error load)"
    )
    parser.add_argument("--baseline", required=True, help="a git ref: the 'before' tree")
    parser.add_argument("--after", help="a git ref: the 'after' tree (default: this working tree)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="write the table into RESULTS.md")
    parser.add_argument("--label", default="latest", help="the table's name in RESULTS.md")
    args = parser.parse_args(argv)
    names = args.names or ["error", "load"]
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)} (known: {', '.join(FIGURES)})")
    before_ref = git("rev-parse", "--short", args.baseline)
    after_ref = git("rev-parse", "--short", args.after or "HEAD")
    dirty = not args.after and bool(git("status", "--porcelain", "--untracked-files=no"))
    with tempfile.TemporaryDirectory(prefix="ipydevice-compare-") as tmp:
        trees = {"before": (os.path.join(tmp, "before"), before_ref)}
        if args.after:
            trees["after"] = (os.path.join(tmp, "after"), after_ref)
        for path, ref in trees.values():
            git("worktree", "add", "--detach", path, ref)
        try:
            after = trees["after"][0] if args.after else ROOT
            rows = compare(trees["before"][0], after, names, args.rounds)
        finally:
            for path, _ in trees.values():
                git("worktree", "remove", "--force", path)
    label = after_ref + (" + uncommitted changes" if dirty else "")
    command = " ".join(["--baseline", before_ref, *(["--after", after_ref] if args.after else [])])
    command += f" --rounds {args.rounds} {' '.join(names)}"
    section = markdown(rows, before_ref, label, args.rounds, command, args.label)
    print(section)
    if args.write:
        write_markdown(section, args.label)
        print(f"wrote the table into {os.path.relpath(RESULTS_MD)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
