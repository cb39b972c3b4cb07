"""Registers, stack and spills of every registered kernel instantiation, without a GPU.

NVRTC compiles each source's instantiations for sm_90 (as ``build.compile_registered``)
with ``-Xptxas=-v``; ptxas's report is matched to the instantiation names.  Use it
before a device session to find kernels that spill or whose registers cap occupancy
(65,536 registers per SM: 255 registers per thread leave 8 warps of 64).

Usage: python3 tools/resources.py [--only lu.cu,cholesky.cu] [--grep thread] [--jobs N]
                                  [--spills-only]
"""

from __future__ import annotations

import argparse
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ENTRY = re.compile(r"Compiling entry function '(\S+)' for")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
REGS = re.compile(r"Used (\d+) registers")


def _report(path: Path, names: list[str], arch: str) -> list[dict]:
    """One NVRTC program of ``names``; a row per instantiation."""
    import batched  # noqa: F401  (registers every kernel)
    from batched.device_functions import build

    _, names_lowered, log = build.compile_program(path, names, arch, extra_options=("-Xptxas=-v",))
    lowered = {low: name for name, low in names_lowered.items()}
    rows, current = [], None
    for line in log.splitlines():
        if m := ENTRY.search(line):
            current = {"source": path.name, "name": lowered.get(m.group(1), m.group(1))}
            rows.append(current)
        elif current is not None and (m := FRAME.search(line)):
            current.update(stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        elif current is not None and (m := REGS.search(line)):
            current["registers"] = int(m.group(1))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=None, help="comma-separated source file names (e.g. lu.cu)")
    p.add_argument("--grep", default=None, help="only instantiations whose name contains this")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--spills-only", action="store_true")
    args = p.parse_args(argv)

    import batched  # noqa: F401
    from batched.device_functions import build

    wanted = set(args.only.split(",")) if args.only else None
    work = []
    for path, names in sorted(build.registered().items()):
        if wanted is not None and path.name not in wanted:
            continue
        names = sorted(n for n in names if args.grep is None or args.grep in n)
        work += [(path, names[i::args.jobs], args.arch) for i in range(args.jobs) if names[i::args.jobs]]
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        rows = [r for part in pool.map(_report, *zip(*work)) for r in part] if work else []
    rows.sort(key=lambda r: (r["source"], r["name"]))
    for r in rows:
        spills = r.get("spill_stores", 0) + r.get("spill_loads", 0)
        if args.spills_only and not spills:
            continue
        print(f"{r.get('registers', '?'):>4} regs {r.get('stack', 0):>5} B stack {r.get('spill_stores', 0):>5}/"
              f"{r.get('spill_loads', 0):<5} B spilled  {r['source']}: {r['name']}")
    print(f"{len(rows)} instantiations", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
