"""Shortest routes between stations, as a table: networkx for the graph, tabulate for
the text. Both come from the policy's `analysis` environment, mounted read-only on the
guest's import path; nothing here edits sys.path."""
import csv
import json
import sys

import networkx as nx
from tabulate import tabulate

src, out = sys.argv[1], sys.argv[2]
graph = nx.Graph()
with open(src, newline="") as f:
    for row in csv.DictReader(f):
        graph.add_edge(row["from"], row["to"], km=float(row["km"]))

rows = []
for target in sorted(graph.nodes):
    if target == "Aberdeen":
        continue
    path = nx.shortest_path(graph, "Aberdeen", target, weight="km")
    km = nx.shortest_path_length(graph, "Aberdeen", target, weight="km")
    rows.append([target, " > ".join(path), km])

print(tabulate(rows, headers=["to", "route", "km"], floatfmt=".1f"))
with open(out, "w") as f:
    json.dump(
        {
            "networkx": nx.__version__,
            "routes": [{"to": t, "route": r, "km": k} for t, r, k in rows],
        },
        f,
        indent=2,
        sort_keys=True,
    )
