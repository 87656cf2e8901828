"""Count the words of a text file and write the most frequent ones as JSON."""

import argparse
import collections
import json
import re

parser = argparse.ArgumentParser()
parser.add_argument("--in", dest="src", required=True)
parser.add_argument("--out", dest="dst", required=True)
parser.add_argument("--top", type=int, default=10)
args = parser.parse_args()

with open(args.src, encoding="utf-8") as f:
    words = re.findall(r"[a-z']+", f.read().lower())
counts = collections.Counter(words)
top = counts.most_common(args.top)
with open(args.dst, "w", encoding="utf-8") as f:
    json.dump({"words": len(words), "distinct": len(counts), "top": top}, f, indent=2)
print(f"{len(words)} words, {len(counts)} distinct; most frequent: {top[0][0]!r}")
