"""Revenue per region and product from an orders CSV, with pandas.

Usage: python groupby.py --in ORDERS.csv --out SUMMARY.csv
Writes one row per (region, product): orders, units, revenue, mean unit price; prints
the revenue per region, largest first.
"""

import argparse
import sys

import pandas as pd


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--in", dest="src", required=True)
    parser.add_argument("--out", dest="dst", required=True)
    args = parser.parse_args()

    orders = pd.read_csv(args.src, dtype={"region": "string", "product": "string"})
    orders["revenue"] = orders["units"] * orders["unit_price"]
    summary = (
        orders.groupby(["region", "product"], sort=True)
        .agg(
            orders=("order_id", "count"),
            units=("units", "sum"),
            revenue=("revenue", "sum"),
            mean_unit_price=("unit_price", "mean"),
        )
        .round({"revenue": 2, "mean_unit_price": 4})
        .reset_index()
    )
    summary.to_csv(args.dst, index=False)

    per_region = summary.groupby("region")["revenue"].sum().sort_values(ascending=False)
    print(f"pandas {pd.__version__}, {len(orders)} orders, {len(summary)} groups")
    for region, revenue in per_region.items():
        print(f"{region}: {revenue:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
