"""Runs every benchmark, prints a table, writes ``results.json`` and the figures
section of ``RESULTS.md``.

Usage::

    python benchmarks/run.py                 # all (about 6 minutes on 2 cores)
    python benchmarks/run.py error devices   # some
    python benchmarks/run.py --quick         # fewer repetitions: a smoke run
    python benchmarks/run.py --no-write      # print only

Each benchmark runs in its own interpreter (see ``common.py``), one after the
other. The exit status is 1 only when a benchmark could not run; missed goals
are printed (and written down in ``RESULTS.md``). The section of ``RESULTS.md`` between the ``figures`` markers is rewritten;
the rest of that file (analysis, causes of any missed goal) is written by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import load_average, machine  # noqa: E402

BENCHMARKS = ("load", "idle", "error", "devices", "memory", "session", "kernel", "scaling")
RESULTS_JSON = os.path.join(HERE, "results.json")
RESULTS_MD = os.path.join(HERE, "RESULTS.md")
START, END = "<!-- figures:start -->", "<!-- figures:end -->"


def run_one(name: str, quick: bool) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "IPYDEVICE_DEBUG"}
    if quick:
        env["IPYDEVICE_BENCH_QUICK"] = "1"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, f"bench_{name}.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,  # session: 2,000 failing cells in two kernels (about a minute)
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        return {
            "name": name,
            "title": name,
            "goal": "",
            "met": False,
            "figures": {},
            "headline": "FAILED: " + (done.stderr.strip().splitlines() or ["?"])[-1],
            "notes": [done.stderr[-3000:]],
            "seconds": round(seconds, 1),
        }
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["seconds"] = round(seconds, 1)
    return result


def table(results: list[dict[str, Any]]) -> str:
    rows = [("benchmark", "goal", "met", "result")]
    for r in results:
        rows.append((r["name"], r["goal"], "yes" if r["met"] else "NO", r["headline"]))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = []
    for index, row in enumerate(rows):
        lines.append(
            "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]
        )
        if index == 0:
            lines.append("-" * (sum(widths) + 6 + len(row[3])))
    return "\n".join(lines)


def markdown(results: list[dict[str, Any]], info: dict[str, Any]) -> str:
    out = [
        START,
        "",
        f"Measured {info['date']} on {info['cpu']} ({info['nproc']} cores, "
        f"{info['memory_gb']} GB), {info['platform']}; Python {info['python']}, "
        f"torch {info['torch']}, IPython {info['IPython']}, ipywidgets {info['ipywidgets']}, "
        f"ipydevice {info['ipydevice']}; CUDA available: {info['cuda']}. "
        f"Load average at the start: {info['load_average']}.",
        "",
        "| benchmark | goal | met | result |",
        "|---|---|---|---|",
    ]
    for r in results:
        out.append(
            f"| {r['name']} | {r['goal']} | {'yes' if r['met'] else '**no**'} | {r['headline']} |"
        )
    for r in results:
        out += ["", f"### {r['name']}: {r['title']}", "", "| figure | value |", "|---|---|"]
        for key, value in r["figures"].items():
            out.append(f"| `{key}` | {_cell(value)} |")
        for note in r.get("notes", []):
            out.append(f"\nNote: {note}")
        if r.get("plot"):
            out += ["", "```", *r["plot"], "```"]
        if r.get("profile") and not r["met"]:
            out += ["", "cProfile of the diagnosis and renderers (5 runs), by own time:", "", "```"]
            out += r["profile"]
            out.append("```")
    out += ["", END]
    return "\n".join(out)


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return "; ".join(str(v) for v in value) or "none"
    return str(value).replace("|", "\\|")


def write_markdown(section: str) -> None:
    try:
        with open(RESULTS_MD) as handle:
            text = handle.read()
    except FileNotFoundError:
        text = f"# Benchmark results\n\n{START}\n{END}\n"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        tail = rest.split(END, 1)[1]
        text = head + section + tail
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    with open(RESULTS_MD, "w") as handle:
        handle.write(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"some of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    names = args.names or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)} (known: {', '.join(BENCHMARKS)})")
    info = machine()
    info["load_average"] = load_average()
    results = []
    for name in names:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results.append(run_one(name, args.quick))
        print(f"  {results[-1]['headline']} ({results[-1]['seconds']} s)", file=sys.stderr)
    print(table(results))
    if not args.no_write:
        if set(names) != set(BENCHMARKS) or args.quick:
            print("(a partial or quick run: results.json and RESULTS.md are left as they were)")
        else:
            with open(RESULTS_JSON, "w") as handle:
                json.dump({"machine": info, "results": results}, handle, indent=2)
                handle.write("\n")
            write_markdown(markdown(results, info))
            print(
                f"wrote {os.path.relpath(RESULTS_JSON)} and the figures of {os.path.relpath(RESULTS_MD)}"
            )
    missed = [r["name"] for r in results if not r["met"]]
    if missed:
        print(f"goals missed: {', '.join(missed)} (causes: benchmarks/RESULTS.md)")
    # A missed goal is a finding, reported above; only a benchmark that could not run fails.
    return 1 if any(r["headline"].startswith("FAILED") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
