"""Compile every registered kernel instantiation for this GPU into the kernel cache (build.cache_dir()).

A fresh machine otherwise compiles each instantiation on its first use (about
half a second each, hundreds of them in a test run).  The instantiations are
split over worker processes (each with its own CUDA context); later processes
load the compiled kernels from the cache.

With ``--arch sm_90`` no GPU is needed: the CUBINs go into the cache folder only
(``BATCHED_CACHE_DIR=$PWD/kernel_cache``), which a device session can carry
(the cache key leaves out paths, so the same versions of NVRTC and CuPy there
find every kernel compiled).

``--prune`` then deletes the cache's files that no registered instantiation of
this checkout uses (a header edit changes every key), so the carried archive
holds only what the run needs.

``--only lu.cu,cholesky.cu`` compiles the instantiations of those sources only
(a device run that changed one kernel file need not wait for all of them).

``--pack FILE`` (with ``--arch``) then writes FILE (kernel_cache.tar.xz, paths under
kernel_cache/) with the cache files of every registered instantiation of this checkout,
plus those written in the last ``--recent`` hours (the scratch copies an A/B compiles
with build._cached_cubin), without pruning the folder: a cache that holds older A/B
variants packs to 20-25 MB in about 1.5 minutes instead of 55 MB in 3.7.

Usage: python3 tools/warm_kernels.py [--jobs N] [--arch sm_90] [--prune] [--only F,G]
                                     [--pack FILE [--recent HOURS]]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time
from pathlib import Path


def _compile(items, arch=None):
    import batched  # noqa: F401  (registers every kernel)
    from batched.device_functions import build

    for path, name in items:
        if arch:   # no GPU needed: compile into the cache only
            build._cached_cubin(Path(path), name, arch)
        else:
            build.get_kernel(path, name)
    return len(items)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    p.add_argument("--arch", default=None,
                   help="compile for this architecture (e.g. sm_90) without a GPU, into "
                        "BATCHED_CACHE_DIR, to carry to a device")
    p.add_argument("--prune", action="store_true",
                   help="delete cache files of instantiations this checkout no longer has (needs --arch)")
    p.add_argument("--only", default="",
                   help="comma-separated kernel source names (e.g. lu.cu,cholesky.cu); default: all")
    p.add_argument("--pack", default=None,
                   help="then write this .tar.xz of the registered instantiations' cache files (needs --arch)")
    p.add_argument("--recent", type=float, default=0.0,
                   help="--pack also takes the cache files written in the last HOURS hours")
    args = p.parse_args()
    import batched  # noqa: F401
    from batched.device_functions import registered

    only = {s for s in args.only.split(",") if s}
    everything = sorted((str(path), name) for path, names in registered().items() for name in names)
    items = [(path, name) for path, name in everything if not only or Path(path).name in only]
    chunks = [items[i::args.jobs] for i in range(args.jobs)]
    started = time.perf_counter()
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        done = sum(pool.starmap(_compile, [(c, args.arch) for c in chunks]))
    print(f"warm_kernels: {done} instantiations in {time.perf_counter() - started:.0f} s "
          f"with {args.jobs} processes")
    if args.prune and args.arch and not only:
        _prune(items, args.arch)
    if args.pack and args.arch:
        _pack(everything, args.arch, args.pack, args.recent)


def _prune(items, arch) -> None:
    from batched.device_functions import build

    keep = {build.cache_key(Path(path), name, arch) for path, name in items}
    stale = [f for f in build.cache_dir().iterdir() if f.suffix in (".cubin", ".json") and f.stem not in keep]
    for f in stale:
        f.unlink()
    print(f"warm_kernels: pruned {len(stale)} stale cache files")


def _pack(items, arch, target, recent_hours) -> None:
    import subprocess
    import tempfile

    from batched.device_functions import build

    folder = build.cache_dir()
    keep = {build.cache_key(Path(path), name, arch) for path, name in items}
    cutoff = time.time() - recent_hours * 3600
    files = [f for f in folder.iterdir() if f.suffix in (".cubin", ".json")
             and (f.stem in keep or (recent_hours > 0 and f.stat().st_mtime > cutoff))]
    missing = len(keep - {f.stem for f in files})
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as listing:   # tar reads the names from a file
        listing.write("\n".join(f"{folder.name}/{f.name}" for f in files))
        listing.flush()
        subprocess.run(["tar", "-cJf", str(Path(target).resolve()), "-C", str(folder.parent), "-T", listing.name],
                       check=True)
    print(f"warm_kernels: packed {len(files)} cache files into {target}"
          + (f" ({missing} registered instantiations not cached)" if missing else ""))


if __name__ == "__main__":
    main()
