#!/usr/bin/env python3
"""Print the median, min and max of each column of a bench script's rounds.

usage: medians.py ROUNDS.TSV DIGITS NAME...

ROUNDS.TSV holds one round a line, the round's number first and then one
column per NAME (a header line is skipped); each column is printed as
"median NAME: X (min X, max X)" with DIGITS decimals.
"""
import statistics
import sys

path, digits, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = [line.rstrip("\n").split("\t") for line in open(path) if line[:1].isdigit()]
for k, name in enumerate(names, start=1):
    v = [float(r[k]) for r in rows]
    print(f"median {name}: {statistics.median(v):.{digits}f} (min {min(v):.{digits}f}, max {max(v):.{digits}f})")
