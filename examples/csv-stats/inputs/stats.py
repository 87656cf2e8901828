"""Per-station weather summary: mean temperature and total rain, from /in/data.csv."""
import argparse
import csv
import json

parser = argparse.ArgumentParser()
parser.add_argument("--in", dest="src", required=True)
parser.add_argument("--out", dest="dst", required=True)
args = parser.parse_args()

stations = {}
with open(args.src, newline="") as f:
    for row in csv.DictReader(f):
        s = stations.setdefault(row["station"], {"days": 0, "temp_sum": 0.0, "rain_mm": 0.0})
        s["days"] += 1
        s["temp_sum"] += float(row["temp_c"])
        s["rain_mm"] += float(row["rain_mm"])

summary = {
    name: {
        "days": s["days"],
        "mean_temp_c": round(s["temp_sum"] / s["days"], 2),
        "total_rain_mm": round(s["rain_mm"], 1),
    }
    for name, s in sorted(stations.items())
}
with open(args.dst, "w") as f:
    json.dump(summary, f, indent=2, sort_keys=True)
    f.write("\n")

for name, s in summary.items():
    print(f"{name}: {s['days']} days, mean {s['mean_temp_c']} C, rain {s['total_rain_mm']} mm")
