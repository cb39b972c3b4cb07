"""Turn a ``bench/gemv.py --sweep`` result into the GEMV chooser's table.

For every swept case the fastest setting is kept, keyed by what the kernel
sees: the column-major view of A (a C-ordered (m, n) matrix is an (n, m)
view, and its 'N' product is the view's transposed product), the view's
transposition and the dtype.  Cases that map to one key (e.g. C-ordered 'T'
and F-ordered 'N' of a square shape) pool their times.

Usage: python3 tools/tune_gemv.py bench/results/<gpu>/gemv_sweep.json > batched/tuning/gemv_sm_90.json
(the sweep file is gemv.json from ``bench/gemv.py --sweep``, renamed to keep it apart
from the default-setting results)
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


# Bench layout -> the chooser's layout key (uniform-F is stacked too).
LAYOUTS = {"uniform": "uniform", "uniform-F": "uniform", "pointer": "pointer", "variable": "variable"}


def view_key(row):
    """(layout, dtype, view trans, view rows, view cols) of a swept case.  Every
    bench layout but uniform-F holds C-ordered matrices, whose view is A^T.  A
    variable-size case (m, n uniform in [1, max]) is keyed by its typical member,
    the mean shape the chooser looks it up by."""
    m, n, trans = row["m"], row["n"], row["trans"] != "N"
    layout = LAYOUTS[row["layout"]]
    if layout == "variable":
        m = n = (1 + m) // 2
    if row["layout"] != "uniform-F":
        return layout, row["dtype"], not trans, n, m
    return layout, row["dtype"], trans, m, n


def table(document) -> dict:
    pooled: dict = defaultdict(lambda: defaultdict(float))
    for row in document["rows"]:
        sweep = row.get("settings")
        if not sweep or row["layout"] not in LAYOUTS:
            continue
        for name, seconds in sweep.items():
            # The packed kernel runs only on some batches (its wins are a list of their
            # own in batched/settings.py); the table names what every batch can run.
            if seconds and not name.endswith("packed"):
                pooled[view_key(row)][name] += seconds / row["bytes"]
    entries = []
    for (layout, dtype, trans, rows, cols), times in sorted(pooled.items()):
        best = min(times, key=times.get)
        entry = {"dtype": dtype, "trans": trans, "rows": rows, "cols": cols, "setting": best}
        entries.append(entry if layout == "uniform" else {"layout": layout, **entry})
    source = f"bench/gemv.py --sweep on {document['gpu']} ({document['date']})"
    merged = document.get("meta", {}).get("merged")  # rows re-measured later and merged in
    return {"source": f"{source}; {merged}" if merged else source, "entries": entries}


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(table(json.load(f)), indent=1))
