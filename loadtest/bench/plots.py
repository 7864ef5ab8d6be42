"""The report's plots (PNG, matplotlib when installed): throughput against clients per
aggregate, and gridagg's throughput against N_size."""

from __future__ import annotations

from pathlib import Path

from ..reports import pyplot
from .log import log
from .systems import System


def make_plots(out: Path, args, systems: list[System], runs: list[dict]) -> list[Path]:
    """Write the plots to `out`; returns their paths (none without matplotlib)."""
    plt = pyplot()
    if plt is None:
        log("matplotlib missing: no plots")
        return []
    paths = []
    for agg in args.aggs:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for s in systems:
            pts = sorted((r["clients"], r["rps"]) for r in runs if r["system"] == s.label and r["agg"] == agg)
            if pts:
                style = "-o" if s.kind == "gridagg" else "--s"
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=s.label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel("queries / s")
        ax.set_title(f"{agg} of wind speed: throughput vs clients")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
        p = out / f"throughput_{agg}.png"
        fig.tight_layout()
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    grid = sorted({s.n_size for s in systems if s.kind == "gridagg"})
    if len(grid) > 1:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for agg in args.aggs:
            for c in args.clients:
                for store in sorted({s.store for s in systems if s.kind == "gridagg"}):
                    ys = [next((r["rps"] for r in runs if r["system"] == f"gridagg-{store} N={n}" and r["agg"] == agg
                                and r["clients"] == c), float("nan")) for n in grid]
                    ax.plot(grid, ys, "-o", label=f"{agg} {store} {c} clients")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N_size")
        ax.set_ylabel("queries / s")
        ax.set_title("gridagg throughput vs N_size")
        ax.legend(fontsize=6)
        ax.grid(True, which="both", alpha=0.3)
        p = out / "throughput_vs_nsize.png"
        fig.tight_layout()
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths
