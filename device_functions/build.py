"""Run-time compilation of the kernel sources, and the compile-everything check.

Kernel sources (``*.cu`` next to the Python that launches them) include the
device-function headers of this folder.  ``get_kernel`` compiles one template
instantiation for the current GPU through NVRTC, keeps the CUBIN in a disk
cache (``BATCHED_CACHE_DIR``, default ``~/.cache/batched``) so that later
processes start fast, loads it with ``cupy.RawModule(path=...)`` and memoizes
the kernel per (source, instantiation, device).  ``compile_registered``
compiles every registered instantiation for a named architecture, without a
GPU, so CI catches a kernel that does not compile.

Why not ``cupy.RawModule(code=...)``: CuPy appends ``-ftz=true`` to every
compilation, which reads single-precision subnormal operands as zero and
flushes subnormal results; LAPACK's scaled algorithms (xNRM2's small
accumulator, xBDSQR on tiny matrices) and cuBLAS keep gradual underflow.
NVRTC's default (``-ftz=false``) is what the kernels are written for.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile

from pathlib import Path

HEADER_DIR = Path(__file__).resolve().parent

_registry: dict[Path, set[str]] = {}
_kernels: dict[tuple, object] = {}


class BuildError(RuntimeError):
    """A kernel failed to compile; the message holds NVRTC's log."""


def register(source, name_expressions) -> None:
    """Declare instantiations of ``source`` that launchers may ask for."""
    _registry.setdefault(Path(source).resolve(), set()).update(name_expressions)


def registered() -> dict[Path, frozenset[str]]:
    return {src: frozenset(names) for src, names in _registry.items()}


@functools.lru_cache(maxsize=None)
def include_dirs() -> tuple[str, ...]:
    """This folder, CuPy's headers, and the CCCL folders inside them.

    NVRTC finds ``<cupy/complex.cuh>`` without a GPU only when the CCCL folders
    (libcudacxx, cub, thrust) are on the include path as well.
    """
    import cupy

    cupy_include = Path(cupy.__file__).resolve().parent / "_core" / "include"
    cccl = cupy_include / "cupy" / "_cccl"
    return (str(HEADER_DIR), str(cupy_include),
            *(str(cccl / d) for d in ("libcudacxx", "cub", "thrust")))


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


@functools.lru_cache(maxsize=None)
def headers_digest(source: Path) -> str:
    """Digest of the headers ``source`` includes, directly or through each other
    (quoted includes found beside it or here): the kernel cache keys on the source
    text and the options, so the digest goes into the options and an edited header
    recompiles exactly the sources that include it (memoized per process, as the
    kernels are)."""
    source = Path(source).resolve()
    found: dict[str, bytes] = {}
    todo = [source.read_text()]
    while todo:
        for name in _INCLUDE.findall(todo.pop()):
            for folder in (source.parent, HEADER_DIR):
                path = folder / name
                if str(path) not in found and path.is_file():
                    found[str(path)] = path.read_bytes()
                    todo.append(found[str(path)].decode())
                    break
    h = hashlib.sha256()
    for path in sorted(found, key=lambda p: Path(p).name):
        h.update(Path(path).name.encode())
        h.update(found[path])
    return h.hexdigest()[:16]


def compile_options(source: Path) -> tuple[str, ...]:
    dirs = (str(Path(source).resolve().parent), *include_dirs())
    return ("-std=c++17", "-ftz=false", f"-DBATCHED_HEADERS_DIGEST=0x{headers_digest(source)}",
            *(f"-I{d}" for d in dirs))


@functools.lru_cache(maxsize=None)
def _source_text(source: Path) -> str:
    return Path(source).read_text()


def cache_dir() -> Path:
    return Path(os.environ.get("BATCHED_CACHE_DIR") or Path.home() / ".cache" / "batched")


def compile_program(path: Path, names, arch: str, extra_options=(), cubin: bool = False):
    """Compile ``names`` (instantiations of the source at ``path``) for ``arch`` in one
    NVRTC program.  Returns (CUBIN or None, {name: lowered name}, NVRTC's log); raises
    ``BuildError`` with the log and the names on failure or when a name produced no
    kernel.  The one NVRTC call of the build layer, the compile check and
    tools/resources.py."""
    from cupy_backends.cuda.libs import nvrtc

    names = sorted(names)
    program = nvrtc.createProgram(_source_text(path), path.name, [], [])
    try:
        for name in names:
            nvrtc.addNameExpression(program, name)
        try:
            nvrtc.compileProgram(program, [*compile_options(path), f"--gpu-architecture={arch}", *extra_options])
        except nvrtc.NVRTCError:
            raise BuildError(f"compiling {path.name} for {arch} failed; instantiations: {', '.join(names)}\n"
                             f"{nvrtc.getProgramLog(program)}") from None
        lowered = {name: nvrtc.getLoweredName(program, name) for name in names}
        return (nvrtc.getCUBIN(program) if cubin else None), lowered, nvrtc.getProgramLog(program)
    finally:
        nvrtc.destroyProgram(program)


def cache_key(path: Path, name_expression: str, arch: str) -> str:
    """The file stem of one instantiation in the kernel cache (see _cached_cubin)."""
    import cupy
    from cupy_backends.cuda.libs import nvrtc

    options = [o for o in compile_options(path) if not o.startswith("-I")]
    return hashlib.sha256(json.dumps([_source_text(path), options, name_expression, arch,
                                      list(nvrtc.getVersion()), cupy.__version__]).encode()).hexdigest()[:32]


def _cached_cubin(path: Path, name_expression: str, arch: str) -> tuple[Path, str]:
    """The cache file of one instantiation's CUBIN (compiled on a miss) and its lowered name.
    The key covers the source, the options but their include paths (the digest of
    this folder's headers is among them; CuPy's headers are named by CuPy's
    version), the name, the architecture and NVRTC's version: a cache built on
    another machine with the same versions (``tools/warm_kernels.py --arch``)
    serves as it is, wherever either keeps its files."""
    key = cache_key(path, name_expression, arch)
    folder = cache_dir()
    cubin, meta = folder / f"{key}.cubin", folder / f"{key}.json"
    if cubin.exists() and meta.exists():
        return cubin, json.loads(meta.read_text())["lowered"]
    image, names, _ = compile_program(path, [name_expression], arch, cubin=True)
    lowered = names[name_expression]
    folder.mkdir(parents=True, exist_ok=True)
    for target, data in ((cubin, image), (meta, json.dumps({"name": name_expression, "lowered": lowered}).encode())):
        fd, tmp = tempfile.mkstemp(dir=folder)   # write then rename: concurrent processes never see half a file
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    return cubin, lowered


def get_kernel(source, name_expression: str):
    """The compiled ``cupy.RawKernel`` of one instantiation on the current device."""
    import cupy

    device = cupy.cuda.runtime.getDevice()
    key = (source, name_expression, device)
    kernel = _kernels.get(key)
    if kernel is None:
        arch = f"sm_{cupy.cuda.Device(device).compute_capability}"   # '90' -> sm_90
        cubin, lowered = _cached_cubin(Path(source).resolve(), name_expression, arch)
        kernel = cupy.RawModule(path=str(cubin)).get_function(lowered)
        _kernels[key] = kernel
    return kernel


def _compile_names(path: Path, names, arch: str, extra_options=()) -> int:
    """Compile ``names`` of the source at ``path`` for ``arch`` in one NVRTC program."""
    compile_program(path, names, arch, extra_options)
    return len(names)


# The compile check's build of every instantiation: device debug code (-G) leaves out
# NVVM's optimizer and most of ptxas's work, 25-50 times faster (session 27, 2 CPU
# cores: gebrd.cu, 8 instantiations, 109 s optimized against 4.3 s; all 1935
# instantiations in 110 s against 12.5-15 minutes), and still runs the front end
# (templates, types), NVVM and ptxas (inline asm, shared-memory and local-memory
# limits) on every one.
CHECK_OPTIONS = ("-G",)
# The batch layouts whose instantiations check_sample passes over: a pointer-array or
# variable-size kernel is its uniform twin with another accessor (layouts.cuh).
_TWIN_LAYOUTS = ("bdf::PointerMatrix<", "bdf::VariableMatrix<")


def check_sample(names) -> list[str]:
    """The instantiations the compile check also builds as get_kernel does (optimized):
    per kernel template and first template argument (a layout with its element type,
    or the element type), one end of its instantiations in sorted order (settings at
    the ends: e.g. the classic and the tensor-core GEMM tiles), the first for the
    template's 1st, 3rd, ... first arguments and the last for the 2nd, 4th, ..., so
    that both ends of a template are built optimized in some element type (both in the
    one there is for a template with one); pointer-array and variable-size twins left
    out.  Every kernel template's optimized build is then tried in every element type,
    against an optimizer or ptxas failure that the debug build would not meet.  (Both
    ends of every group took 533 of the check's 978 single-core seconds, session 41:
    GEBRD's blocked kernel alone 14-27 s an instantiation.)"""
    ends: dict[tuple, list[str]] = {}
    for name in sorted(names):
        head, _, args = name.partition("<")
        if args.startswith(_TWIN_LAYOUTS):
            continue
        group = ends.setdefault((head, _first_template_argument(args)), [name, name])
        group[1] = name
    sample = set()
    by_template: dict[str, list[list[str]]] = {}
    for (head, _), group in sorted(ends.items()):
        by_template.setdefault(head, []).append(group)
    for groups in by_template.values():
        if len(groups) == 1:
            sample.update(groups[0])
        else:
            sample.update(group[i % 2] for i, group in enumerate(groups))
    return sorted(sample)


def _first_template_argument(args: str) -> str:
    depth = 0
    for i, ch in enumerate(args):
        if ch == "<":
            depth += 1
        elif ch == ">":
            if depth == 0:
                return args[:i].strip()
            depth -= 1
        elif ch == "," and depth == 0:
            return args[:i].strip()
    return args.strip()


def compile_registered(arch: str = "sm_90", sources=None, jobs: int = 1, optimized_all: bool = False) -> dict[str, int]:
    """Compile every registered instantiation for ``arch`` through NVRTC.

    Needs no GPU (only the NVRTC library, e.g. the ``nvidia-cuda-nvrtc``
    wheel).  Returns {source name: number of instantiations}; raises
    ``BuildError`` with NVRTC's log and the instantiation names on failure.
    Every instantiation is built with CHECK_OPTIONS (debug code, to a CUBIN), and
    ``check_sample``'s as get_kernel builds them; ``optimized_all`` builds every one
    as get_kernel does instead.  ``jobs`` > 1 splits the work over that many worker
    processes (code generation dominates, so the time divides by the cores).
    """
    work = []
    for path, names in sorted(registered().items()):
        if sources is not None and path.name not in sources:
            continue
        names = sorted(names)
        if optimized_all:
            work.append((path, names, ()))
        else:
            work += [(path, names, CHECK_OPTIONS), (path, check_sample(names), ())]
    chunks = [(path, names[i::jobs], arch, options) for path, names, options in work for i in range(max(jobs, 1))
              if names[i::jobs]]
    if jobs > 1 and len(chunks) > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
            counts = list(pool.map(_compile_names, *zip(*chunks)))
    else:
        counts = [_compile_names(*chunk) for chunk in chunks]
    done = {path.name: 0 for path, _, _ in work}
    for (path, _, _, options), count in zip(chunks, counts):
        if options or optimized_all:  # each instantiation counted once, in its full build
            done[path.name] += count
    return done
