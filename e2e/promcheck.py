#!/usr/bin/env python3
"""Validates a Prometheus text exposition (stdin) with prometheus_client's own parser.

Usage: promcheck.py [FAMILY:TYPE[:LABEL,...]]...
Every line of the input must parse. Each argument names a family that must be there with that
type (counter, gauge, histogram) and, when labels are given, with at least one sample carrying
exactly those label names ("le" aside). Counters are named as exposed (with _total). Prints one
line per family checked and exits 1 on the first problem.
"""
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = sys.stdin.read()
    try:
        families = {}
        for fam in text_string_to_metric_families(text):
            # The parser drops a counter's _total suffix from the family name.
            name = fam.name + "_total" if fam.type == "counter" else fam.name
            families[name] = fam
    except Exception as e:  # the parser raises ValueError and friends on bad text
        print(f"promcheck: the exposition does not parse: {e}")
        return 1
    for spec in sys.argv[1:]:
        parts = spec.split(":")
        name, want_type = parts[0], parts[1]
        want_labels = set(parts[2].split(",")) if len(parts) > 2 and parts[2] else None
        fam = families.get(name)
        if fam is None:
            print(f"promcheck: no family {name}")
            return 1
        if fam.type != want_type:
            print(f"promcheck: {name} is a {fam.type}, expected {want_type}")
            return 1
        if want_labels is not None:
            seen = [set(s.labels) - {"le"} for s in fam.samples]
            if want_labels not in seen:
                print(f"promcheck: {name} has no sample with labels {sorted(want_labels)}: {seen[:3]}")
                return 1
        print(f"promcheck: {name} {fam.type} ({len(fam.samples)} samples)")
    print(f"promcheck: {len(families)} families parse")
    return 0


if __name__ == "__main__":
    sys.exit(main())
