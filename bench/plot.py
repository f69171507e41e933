"""Plot the lock benchmark: docs/assets/bench-locks.png, from a short real run.

Run:  python bench/plot.py                    # ~40 s: runs bench/locks.py, then plots
      python bench/plot.py --from results.json   # plot a saved ``locks.py --json`` run

Needs matplotlib (``pip install -e ".[bench]"``); it is not a cronlock dependency.

The run is ``bench/locks.py --json PATH`` on its own private Redis server, limited by
default to the rows the docs discuss (the floor, the Lua floor, cronlock with renew off
and on, redis-py's Lock; ``--all`` adds python-redis-lock and pottery when installed).
The figure has two panels:

* uncontended cycles/s (one thread): each dot is one slice, the bar is the median;
* the paired ratio to the floor: the median over rounds of the rate divided by the
  floor's rate in the same round (what drift of a shared machine cannot move), with
  the 0.95 and 0.9 targets drawn in.

Figures from a shared, loaded machine move by several percent between runs; the page
that shows the picture (docs/benchmarks.md) gives the repeated runs from bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "docs" / "assets" / "bench-locks.png"
CORE = ["Lua floor", "cronlock", "redis-py"]


def measure(slices: int, slice_s: float, everything: bool) -> dict[str, Any]:
    """Run bench/locks.py with --json and return what it wrote (its table is echoed)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "locks.json"
        command = [
            sys.executable,
            str(HERE / "locks.py"),
            "--slices",
            str(slices),
            "--slice",
            str(slice_s),
            "--contended-slices",
            "2",
            "--json",
            str(path),
        ]
        if not everything:
            for name in CORE:
                command += ["--only", name]
        subprocess.run(command, check=True)
        result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return result


def plot(result: dict[str, Any], out: Path) -> None:
    """Draw the two panels into ``out`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    impls: dict[str, Any] = result["implementations"]
    names = list(impls)
    rows = range(len(names))
    medians = [statistics.median(impls[n]["rates"]) for n in names]
    paired = [float(impls[n]["paired"]) for n in names]
    colours = [
        "#9e9e9e" if "floor" in n else "#1565c0" if "cronlock" in n else "#ef6c00" for n in names
    ]

    fig, (left, right) = plt.subplots(
        1,
        2,
        figsize=(11, 0.55 * len(names) + 1.9),
        sharey=True,
        gridspec_kw={"width_ratios": [3, 2]},
    )
    left.barh(rows, medians, color=colours, alpha=0.35)
    for row, name in zip(rows, names):
        rates = impls[name]["rates"]
        left.scatter(rates, [row] * len(rates), s=9, color=colours[row], zorder=3)
        left.annotate(
            f"{medians[row]:,.0f}",
            (medians[row], row),
            xytext=(4, 6),
            textcoords="offset points",
            fontsize=8,
        )
    left.set_yticks(list(rows), names)
    left.invert_yaxis()
    left.set_xlabel("acquire + release cycles/s, one thread (dots: slices; bar: median)")
    left.grid(axis="x", alpha=0.3)

    right.barh(rows, paired, color=colours)
    for row, value in zip(rows, paired):
        right.annotate(
            f"{value:.2f}", (value, row), xytext=(4, -3), textcoords="offset points", fontsize=8
        )
    right.axvline(
        0.95, color="#c62828", linestyle=":", linewidth=1, label="target, renew off: 0.95"
    )
    right.axvline(0.9, color="#6a1b9a", linestyle="--", linewidth=1, label="target, renew on: 0.9")
    right.legend(loc="lower left", fontsize=8, framealpha=0.9)
    right.set_xlim(0, max(1.15, max(paired) + 0.1))
    right.set_xlabel("paired ratio to the floor (median over rounds)")
    right.grid(axis="x", alpha=0.3)

    fig.suptitle(
        f"Lock cycles: redis {result['redis_version']}, redis-py {result['redis_py']}, "
        f"{result['slices']} rounds x {result['slice_seconds']} s, shuffled order",
        fontsize=10,
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--from", dest="source", metavar="PATH", help="plot this locks.py --json file"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="PNG to write")
    parser.add_argument("--slices", type=int, default=20, help="rounds (default 20)")
    parser.add_argument("--slice", type=float, default=0.3, help="seconds per slice")
    parser.add_argument("--all", action="store_true", help="every implementation locks.py knows")
    parser.add_argument("--save-json", metavar="PATH", help="also keep the measurement")
    args = parser.parse_args()
    if args.source:
        result = json.loads(Path(args.source).read_text(encoding="utf-8"))
    else:
        result = measure(args.slices, args.slice, args.all)
    if args.save_json:
        Path(args.save_json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    plot(result, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
