#!/usr/bin/env python3
"""Draws a lab's plots from the JSON the lab wrote, never from typed numbers.

Usage: python3 tools/plot_lab.py results/02_kv_cache/02_kv_cache.json [...]

Each entry of the JSON's "plots" list names a table and the columns to draw;
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


def column(table, name):
    if name not in table["columns"]:
        raise SystemExit(f"plot_lab.py: table {table['name']!r} has no column {name!r} (has {table['columns']})")
    i = table["columns"].index(name)
    return [row[i] for row in table["rows"] if isinstance(row[i], (int, float))]


def draw(results_path):
    results = json.loads(results_path.read_text())
    tables = {t["name"]: t for t in results["tables"]}
    machine = results["machine"]
    for spec in results["plots"]:
        if spec["table"] not in tables:
            raise SystemExit(f"plot_lab.py: {results_path}: plot {spec['name']!r} needs missing table {spec['table']!r}")
        table = tables[spec["table"]]
        xs = column(table, spec["x"])
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for y in spec["y"]:
            ys = column(table, y)
            ax.plot(xs[: len(ys)], ys, marker="o" if len(xs) <= 20 else None, markersize=4, label=y)
        ax.set_title(spec["title"])
        ax.set_xlabel(spec["xlabel"])
        ax.set_ylabel(spec["ylabel"])
        if spec.get("logy"):
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend()
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
