"""``python -m batched demo``: a realistic workload checked against NumPy.

``python -m batched bench [args]`` runs the benchmark scripts of ``bench/``
(from a source checkout).
"""

from __future__ import annotations

import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv.pop(0) if argv else "demo"
    if command == "demo":
        from .demo import run

        return run(argv)
    if command == "bench":
        import runpy
        from pathlib import Path

        script = Path(__file__).resolve().parent.parent / "bench" / "run_all.py"
        if not script.exists():
            print("bench/ is not installed with the package; run it from a source checkout",
                  file=sys.stderr)
            return 2
        sys.argv = [str(script), *argv]
        runpy.run_path(str(script), run_name="__main__")
        return 0
    print(f"usage: python -m batched [demo|bench] (unknown command {command!r})", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
