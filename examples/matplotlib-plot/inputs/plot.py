"""Monthly mean temperatures of three cities, as a line chart saved to a PNG.

Usage: python plot.py --in /in/temperatures.csv --out /out/temperatures.png
"""

import argparse
import csv

import matplotlib
import matplotlib.pyplot as plt

parser = argparse.ArgumentParser()
parser.add_argument("--in", dest="source", required=True)
parser.add_argument("--out", dest="target", required=True)
args = parser.parse_args()

with open(args.source, newline="") as f:
    rows = list(csv.DictReader(f))
months = [r["month"] for r in rows]
cities = [c for c in rows[0] if c != "month"]

fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
for city in cities:
    ax.plot(months, [float(r[city]) for r in rows], marker="o", label=city.capitalize())
ax.axhline(0, color="grey", linewidth=0.8)
ax.set_title("Monthly mean temperature")
ax.set_ylabel("°C")
ax.grid(True, alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(args.target)

width, height = (round(v) for v in fig.get_size_inches() * fig.dpi)
print(f"matplotlib {matplotlib.__version__}, backend {matplotlib.get_backend()}")
for city in cities:
    values = [float(r[city]) for r in rows]
    print(f"{city}: min {min(values):.1f}, max {max(values):.1f}")
print(f"{args.target}: {width}x{height} px")
