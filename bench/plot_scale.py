"""Plot the fleet benchmark: docs/assets/bench-scale.png, server CPU per job-slot by replicas.

Run:  python bench/plot_scale.py --from scale.json   # a saved ``scale.py --json`` run

Needs matplotlib (``pip install -e ".[bench]"``); it is not a cronlock dependency. One
panel per number of jobs (J); each line is a fleet of the run (before, after, naive):
the server's CPU per job-slot against the number of replicas. Figures from a shared,
loaded machine move between runs; the page that shows the picture (docs/benchmarks.md)
gives the table the run printed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "docs" / "assets" / "bench-scale.png"
COLOURS = {"before": "#9e9e9e", "after": "#1565c0", "cronlock": "#1565c0", "naive": "#ef6c00"}
# Where each fleet's figures sit beside its points (offset points), so close lines'
# labels do not overwrite each other: before above, after below, naive to the left.
LABEL_AT = {"before": (4, 5), "after": (4, -12), "cronlock": (4, -12), "naive": (-26, 5)}


def plot(result: dict[str, Any], out: Path) -> None:
    """One panel per J: server CPU µs per job-slot against R, a line per fleet."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    points: list[dict[str, Any]] = result["points"]
    jobs = sorted({p["jobs"] for p in points})
    fig, axes = plt.subplots(1, len(jobs), figsize=(4.2 * len(jobs), 3.6), squeeze=False)
    for ax, j in zip(axes[0], jobs):
        fleets = dict.fromkeys(p["fleet"] for p in points if p["jobs"] == j)
        for fleet in fleets:
            line = sorted(
                (p["replicas"], p["server_us"])
                for p in points
                if p["jobs"] == j and p["fleet"] == fleet
            )
            xs, ys = zip(*line)
            ax.plot(xs, ys, marker="o", color=COLOURS.get(fleet, "#000000"), label=fleet)
            for x, y in line:
                ax.annotate(
                    f"{y:.0f}",
                    (x, y),
                    xytext=LABEL_AT.get(fleet, (4, 4)),
                    textcoords="offset points",
                    fontsize=8,
                )
        ax.set_title(f"{j:,} jobs at 1 s", fontsize=10)
        ax.set_xlabel("replicas")
        ax.set_xticks(sorted({p["replicas"] for p in points}))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("Redis CPU µs per job-slot")
    fig.suptitle(
        f"Server CPU per job-slot (INFO cpu), {result['seconds']} s per point, "
        f"lease {result['ttl']} s",
        fontsize=10,
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--from", dest="source", metavar="PATH", required=True)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="PNG to write")
    args = parser.parse_args()
    plot(json.loads(Path(args.source).read_text(encoding="utf-8")), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
