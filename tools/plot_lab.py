#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Draws a lab's plots from the JSON the lab wrote, never from typed numbers.

Usage: python3 tools/plot_lab.py results/02_kv_cache/02_kv_cache.json [...]

Each entry of the JSON's "plots" list (labs/common/report.h, PlotSpec) names, under "data", a
table and the columns to draw, and under "labels" its title and axis labels;
the PNG lands beside the JSON as <plot name>.png. Exits 77 (ctest's skip
code) when matplotlib is missing, so tests report SKIP rather than PASS.
"""
import json
import pathlib
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("plot_lab.py: matplotlib is not installed (Debian: apt-get install python3-matplotlib)", file=sys.stderr)
    sys.exit(77)


def index(table, name):
    if name not in table["columns"]:
        raise SystemExit(f"plot_lab.py: table {table['name']!r} has no column {name!r} (has {table['columns']})")
    return table["columns"].index(name)


def column(table, name):
    i = index(table, name)
    return [row[i] for row in table["rows"] if isinstance(row[i], (int, float))]


def points(table, x, y):
    """The (x, y) pairs of the rows where both cells are numbers, by x: a table may hold several lines
    over different x values, each row filling only its own line's column."""
    i, j = index(table, x), index(table, y)
    pairs = sorted((r[i], r[j]) for r in table["rows"] if all(isinstance(r[k], (int, float)) for k in (i, j)))
    return [p[0] for p in pairs], [p[1] for p in pairs]


def label_points(ax, xs, ys, texts):
    """Labels points, alternating below and above in x order, so that neighbours do not overlap."""
    order = sorted(range(min(len(xs), len(ys), len(texts))), key=lambda k: xs[k])
    for rank, k in enumerate(order):
        ax.annotate(texts[k], (xs[k], ys[k]), fontsize=6, textcoords="offset points",
                    xytext=(3, -9) if rank % 2 == 0 else (-12, 6))


def draw_roofline(ax, spec, data, tables):
    """Log-log roofline: each hardware's min(peak, I x bandwidth) with its ridge, then the measured points
    and, where the spec names them, reference steps placed on one roof."""
    roofs = tables[spec["roofs"]]
    points = tables[data["table"]]
    xs = [x for x in column(points, data["x"]) if x > 0]
    lo, hi = min(xs + [0.1]) / 2, max(xs + [1000]) * 2
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    roof_of = {}
    for row in roofs["rows"]:
        name = row[index(roofs, "hardware")]
        peak = row[index(roofs, "peak GFLOP/s")]
        bw = row[index(roofs, "bandwidth GB/s")]
        roof_of[name] = (peak, bw)
        line, = ax.plot(grid, [min(peak, i * bw) for i in grid], linewidth=1.2,
                        label=f"{name} roof (ridge {peak / bw:.0f})")
        ax.axvline(peak / bw, color=line.get_color(), linestyle=":", linewidth=0.8)
    labels = [r[index(points, "point")] for r in points["rows"]] if "point" in points["columns"] else []
    for y in data["y"]:
        ys = column(points, y)
        ax.scatter(xs[: len(ys)], ys, zorder=5, color="black", s=18, label="measured here")
        label_points(ax, xs[: len(ys)], ys, labels)
    if spec.get("reference"):
        ref, roof = tables[spec["reference"]], spec["reference_roof"]
        if roof not in roof_of:
            raise SystemExit(f"plot_lab.py: reference roof {roof!r} is not a row of table {spec['roofs']!r}")
        peak, bw = roof_of[roof]
        rx = [r[index(ref, "intensity [FLOP/B]")] for r in ref["rows"]]
        ry = [min(peak, x * bw) for x in rx]
        ax.scatter(rx, ry, zorder=6, facecolors="none", edgecolors="black", s=36,
                   label=f"{ref['title']} on the {roof}")
        label_points(ax, rx, ry, [r[index(ref, "step")] for r in ref["rows"]])
    ax.set_xscale("log")
    ax.set_yscale("log")


def draw(results_path):
    results = json.loads(results_path.read_text())
    tables = {t["name"]: t for t in results["tables"]}
    machine = results["machine"]
    for spec in results["plots"]:
        data, labels = spec["data"], spec["labels"]
        if data["table"] not in tables:
            raise SystemExit(f"plot_lab.py: {results_path}: plot {spec['name']!r} needs missing table {data['table']!r}")
        table = tables[data["table"]]
        roofline = spec.get("kind") == "roofline"
        fig, ax = plt.subplots(figsize=(10, 4.8) if roofline else (7, 4.2))
        if roofline:
            draw_roofline(ax, spec, data, tables)
        else:
            for y in data["y"]:
                xs, ys = points(table, data["x"], y)
                ax.plot(xs, ys, marker="o" if len(xs) <= 20 else None, markersize=4, label=y)
        ax.set_title(labels["title"])
        ax.set_xlabel(labels["xlabel"])
        ax.set_ylabel(labels["ylabel"])
        if spec.get("logy"):
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        if roofline:  # many roofs: the legend goes beside the plot, not over the points
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        else:
            ax.legend(fontsize=7)
        settings = results["settings"]
        fig.text(0.01, 0.01, f"{settings.get('model', '')} | {machine['cpu']} | {machine['date_utc']} | "
                 f"commit {machine['git_commit']}", fontsize=7, color="gray")
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        out = results_path.parent / f"{spec['name']}.png"
        fig.savefig(out, dpi=110)
        plt.close(fig)
        print(f"plot: {out}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    for arg in sys.argv[1:]:
        path = pathlib.Path(arg)
        if not path.is_file():
            raise SystemExit(f"plot_lab.py: {arg}: no such results file")
        draw(path)
