"""The build layer and the planner, on the CPU.

Every registered kernel instantiation compiles for sm_90 through NVRTC without
a GPU (CI's guarantee that a kernel which does not compile never lands: every
one as device debug code, front end, NVVM and ptxas, and a sample of every
kernel template and element type as get_kernel builds it); a broken source
reports the instantiations it was asked for; the default choosers only pick
registered settings.
"""

from __future__ import annotations

import importlib
import itertools
import os

import numpy as np
import pytest

import batched
from batched.device_functions import BuildError, build, compile_registered, register, registered
from batched.settings import MMA_DTYPES, STAGE_BLOCK_BYTES, choose_gemm_setting, choose_gemv_setting, stage_fits


def _nvrtc_unavailable_reason():
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as exc:  # no NVRTC library (e.g. the nvidia-cuda-nvrtc wheel) to load
        return f"NVRTC cannot be loaded: {type(exc).__name__}: {exc}"
    return None


NVRTC_MISSING = _nvrtc_unavailable_reason()
needs_nvrtc = pytest.mark.skipif(NVRTC_MISSING is not None, reason=NVRTC_MISSING or "")

LAYOUTS = ("uniform", "pointer", "variable")
# the modules (``batched.gemv`` as an attribute is the function)
gemv_module = importlib.import_module("batched.gemv")
gemm_module = importlib.import_module("batched.gemm")


def test_registry_holds_every_setting_dtype_and_layout():
    reg = {path.name: names for path, names in registered().items()}
    assert "gemv.cu" in reg and "gemm.cu" in reg
    plain = [s for s in batched.GEMV_SETTINGS if not s.packed]
    packed = [s for s in batched.GEMV_SETTINGS if s.packed]
    # the packed kernel: stacked and pointer-array batches, one instantiation a piece count
    gemv_expected = {gemv_module.kernel_name(layout, dt, s, t) for layout in LAYOUTS
                     for dt in batched.SUPPORTED_DTYPES for s in plain for t in (False, True)}
    gemv_expected |= {gemv_module.kernel_name(layout, dt, s, t, ppc) for layout in gemv_module.PACKED_LAYOUTS
                      for dt in batched.SUPPORTED_DTYPES for s in packed for ppc in gemv_module.PACKED_PIECES
                      for t in (False, True)}
    gemm_expected = {gemm_module.kernel_name(layout, dt, s) for layout in LAYOUTS
                     for s in batched.GEMM_SETTINGS for dt in s.dtypes(batched.SUPPORTED_DTYPES)}
    assert reg["gemv.cu"] == gemv_expected
    assert reg["gemm.cu"] == gemm_expected
    assert len(reg["gemv.cu"]) == 4 * 2 * (len(LAYOUTS) * len(plain) + len(gemv_module.PACKED_LAYOUTS)
                                           * len(packed) * len(gemv_module.PACKED_PIECES))
    tensor = sum(1 for s in batched.GEMM_SETTINGS if s.mma)
    assert tensor >= 1
    # tensor-core settings: float64 and complex128
    assert len(reg["gemm.cu"]) == len(LAYOUTS) * (4 * (len(batched.GEMM_SETTINGS) - tensor) + 2 * tensor)


@needs_nvrtc
def test_every_registered_instantiation_compiles_for_sm90():
    counts = compile_registered("sm_90", jobs=os.cpu_count() or 1)
    expected = {path.name: len(names) for path, names in registered().items()}
    assert counts == expected
    assert "gemv.cu" in counts and "gemm.cu" in counts
    assert counts["gemv.cu"] > 0 and counts["gemm.cu"] > 0


BROKEN_SOURCE = """\
// A template with a syntax error: compiling its instantiation must fail.
template <typename T>
__global__ void broken_kernel(T* out) {
  out[threadIdx.x] = T(1) +* ;
}
"""


@needs_nvrtc
def test_broken_source_raises_build_error_naming_the_instantiation(tmp_path):
    path = tmp_path / "broken_kernel_for_test.cu"
    path.write_text(BROKEN_SOURCE)
    key = path.resolve()
    assert key not in build._registry
    register(path, ["broken_kernel<float>"])
    try:
        with pytest.raises(BuildError) as info:
            compile_registered("sm_90", sources={path.name})
        message = str(info.value)
        assert "broken_kernel<float>" in message
        assert path.name in message
    finally:
        build._registry.pop(key, None)
    assert key not in registered()


# An instantiation whose error only ptxas sees: the front end passes inline asm through.
PTXAS_ONLY_ERROR_SOURCE = """\
// An inline-asm instruction that does not exist: PTX is emitted, ptxas rejects it.
namespace bdf {
template <typename T> struct UniformMatrix { T* p; };
template <typename T> struct PointerMatrix { T** p; };
}
template <class M>
__global__ void bad_asm_kernel(M m) {
  asm volatile("no.such.instruction;");
}
"""


def test_check_sample_covers_every_kernel_template_and_element_type():
    assert build.CHECK_OPTIONS == ("-G",)
    for path, names in registered().items():
        sample = build.check_sample(names)
        assert set(sample) <= names
        twins = ("bdf::PointerMatrix<", "bdf::VariableMatrix<")
        twin_free = {n for n in names if not n.partition("<")[2].startswith(twins)}
        assert set(sample) <= twin_free
        keys = {(n.partition("<")[0], build._first_template_argument(n.partition("<")[2])) for n in twin_free}
        sampled = {(n.partition("<")[0], build._first_template_argument(n.partition("<")[2])) for n in sample}
        assert sampled == keys, (path.name, keys - sampled)
        alone = {h for h in {k[0] for k in keys} if sum(k[0] == h for k in keys) == 1}
        assert len(sample) <= len(keys) + len(alone)  # one end a group, both for a template's only one
        # both ends of every template's instantiations (in sorted order, per first
        # template argument) are built optimized in some element type
        for head in {k[0] for k in keys}:
            groups = [sorted(n for n in twin_free if n.partition("<")[0] == head and
                             build._first_template_argument(n.partition("<")[2]) == first)
                      for first in sorted(k[1] for k in keys if k[0] == head)]
            assert any(g[0] in sample for g in groups) and any(g[-1] in sample for g in groups), (path.name, head)
    assert build._first_template_argument("bdf::UniformMatrix<complex<double>>, 16, 4>") == \
        "bdf::UniformMatrix<complex<double>>"
    assert build._first_template_argument("double>") == "double"


@needs_nvrtc
def test_the_check_runs_ptxas_on_every_instantiation(tmp_path):
    path = tmp_path / "bad_asm_for_test.cu"
    path.write_text(PTXAS_ONLY_ERROR_SOURCE)
    pointer = "bad_asm_kernel<bdf::PointerMatrix<double>>"
    try:
        register(path, [pointer])  # not in the optimized sample: the debug build's ptxas rejects it
        assert build.check_sample([pointer]) == []
        with pytest.raises(BuildError, match="bad_asm_kernel") as info:
            compile_registered("sm_90", sources={path.name})
        assert pointer in str(info.value)
        with pytest.raises(BuildError, match="bad_asm_kernel"):
            compile_registered("sm_90", sources={path.name}, optimized_all=True)
    finally:
        build._registry.pop(path.resolve(), None)


# --- planner -----------------------------------------------------------------------------


def test_gemv_chooser_puts_small_matrices_in_sub_warp_groups():
    s = choose_gemv_setting(8, 8, True, 10**6)
    assert s.group_threads <= 32
    assert s in batched.GEMV_SETTINGS
    s = choose_gemv_setting(8, 8, False, 10**6)
    assert s.group_threads <= 32


def test_gemv_chooser_takes_tall_tiles_only_where_they_fill_their_tiles_and_the_gpu():
    assert choose_gemv_setting(512, 512, False, 10**4, 132, False, "float64").tall
    assert choose_gemv_setting(512, 512, True, 10**4, 132, False, "float32").tall
    for rows, cols in ((40, 300), (300, 40), (512, 8)):  # most lanes or warps of a tile masked
        for trans in (False, True):
            assert not choose_gemv_setting(rows, cols, trans, 10**5, 132, False, "float64").tall
    # four 2048 x 2048 matrices: 64 row tiles ('N') for 132 SMs
    assert not choose_gemv_setting(2048, 2048, False, 4, 132, False, "float64").tall


def test_gemv_chooser_takes_the_packed_kernel_only_where_it_won_and_the_batch_allows():
    from batched.settings import PACKED_SETTING
    assert choose_gemv_setting(32, 32, True, 65536, 132, True, "float32", packed=True) == PACKED_SETTING
    assert choose_gemv_setting(8, 81, True, 10**5, 132, True, "float64", packed=True) == PACKED_SETTING
    assert choose_gemv_setting(32, 32, True, 65536, 132, True, "float32", packed=False) != PACKED_SETTING
    assert choose_gemv_setting(32, 32, True, 65536, 132, True, "float32", "pointer", packed=True) == PACKED_SETTING
    assert choose_gemv_setting(32, 32, True, 65536, 132, True, "float32", "variable", packed=True) != PACKED_SETTING
    for rows, cols in ((8, 8), (128, 128), (8, 8000)):  # lost, or never measured
        assert choose_gemv_setting(rows, cols, True, 10**5, 132, True, "float32", packed=True) != PACKED_SETTING
    assert choose_gemv_setting(32, 32, True, 4, 132, True, "float32", packed=True) != PACKED_SETTING
    names = {path.name: n for path, n in registered().items()}["gemv.cu"]
    for layout, dt in itertools.product(gemv_module.PACKED_LAYOUTS, batched.SUPPORTED_DTYPES):
        for ppc in gemv_module.PACKED_PIECES:
            for trans in (False, True):
                assert gemv_module.kernel_name(layout, dt, PACKED_SETTING, trans, ppc) in names


EDGE_SIZES = (0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 513)
COUNTS = (1, 10, 1000, 10**6)
SMS = (1, 16, 132)


def test_every_default_gemv_setting_is_registered():
    names = {path.name: n for path, n in registered().items()}["gemv.cu"]
    for rows, cols, trans, count, sms, stageable, dt in itertools.product(
            EDGE_SIZES, EDGE_SIZES, (False, True), COUNTS, SMS, (False, True), batched.SUPPORTED_DTYPES):
        s = choose_gemv_setting(rows, cols, trans, count, sms, stageable, np.dtype(dt).name)
        assert s in batched.GEMV_SETTINGS, (rows, cols, trans, count, sms, s)
        assert stageable or not s.staged, (rows, cols, trans, s)
        assert gemv_module.kernel_name("uniform", dt, s, trans) in names


def test_gemv_table_names_registered_settings_and_measured_shapes():
    from batched.settings import GEMV_TABLE, table_gemv_setting

    assert GEMV_TABLE, "the tuning table is empty"
    for (layout, dtype, trans), entries in GEMV_TABLE.items():
        assert layout in ("uniform", "pointer", "variable")
        assert dtype in {np.dtype(d).name for d in batched.SUPPORTED_DTYPES}
        for rows, cols, setting in entries:
            assert setting in batched.GEMV_SETTINGS
            # a measured shape maps to itself
            assert table_gemv_setting(dtype, trans, rows, cols, layout) == setting


def test_every_default_gemm_setting_is_registered():
    names = {path.name: n for path, n in registered().items()}["gemm.cu"]
    for m, n, k, count, sms in itertools.product(EDGE_SIZES, EDGE_SIZES, (0, 1, 33), COUNTS, SMS):
        for dt in batched.SUPPORTED_DTYPES:
            s = choose_gemm_setting(m, n, k, count, sms, np.dtype(dt)).for_dtype(np.dtype(dt))
            assert s in batched.GEMM_SETTINGS, (m, n, k, count, sms, s)
            assert gemm_module.kernel_name("pointer", dt, s) in names


@pytest.mark.parametrize("setting", batched.GEMM_SETTINGS, ids=str)
def test_every_gemm_setting_runs_as_a_registered_setting_for_every_dtype(setting):
    names = {path.name: n for path, n in registered().items()}["gemm.cu"]
    for dt in batched.SUPPORTED_DTYPES:
        twin = setting.for_dtype(np.dtype(dt))
        assert twin in batched.GEMM_SETTINGS
        assert (twin is setting) == (not setting.mma or str(np.dtype(dt)) in MMA_DTYPES)
        assert not twin.mma or str(np.dtype(dt)) in MMA_DTYPES
        assert twin.blk_m >= min(setting.blk_m, 64)
        assert gemm_module.kernel_name("uniform", dt, twin) in names


@pytest.mark.parametrize("setting", batched.GEMV_SETTINGS, ids=str)
def test_gemv_setting_block_shape(setting):
    assert setting.block_threads % setting.group_threads == 0
    assert setting.block_threads <= 1024
    assert setting.groups_per_block >= 1
    assert setting.tiles(0) >= 1 and setting.tiles(1000) >= 1
    if setting.tall:  # the N kernel sums and stores a tile's rows a thread each (kblas.cuh)
        for itemsize in (4, 8, 16):
            assert setting.block_threads >= setting.tall_rows(itemsize)


@pytest.mark.parametrize("setting", [s for s in batched.GEMV_SETTINGS if s.staged], ids=str)
def test_staged_gemv_setting_has_an_unstaged_twin_and_fits_its_block(setting):
    # a staged setting falls back to its twin on matrices too big for shared memory
    assert setting.unstaged() in batched.GEMV_SETTINGS
    assert setting.group_threads <= 32
    for capacity, itemsize in itertools.product((1, 17, 300, 1536), (4, 8, 16)):
        if not stage_fits(capacity, itemsize):
            continue
        groups = setting.stage_groups_per_block(capacity, itemsize)
        assert 1 <= groups and groups * setting.group_threads <= 256
        assert groups * setting.stage_bytes(capacity, itemsize) <= STAGE_BLOCK_BYTES
    assert not stage_fits(STAGE_BLOCK_BYTES // 16 + 1, 8)


@pytest.mark.parametrize("setting", batched.GEMM_SETTINGS, ids=str)
def test_gemm_setting_fits_the_shared_memory_limit(setting):
    assert setting.block_threads % setting.group_threads == 0
    assert setting.block_threads <= 1024
    # dynamic shared memory: past 48 KiB the launcher opts in, up to the H100's 227 KiB
    assert setting.smem_bytes(np.dtype(np.complex128).itemsize) <= 227 * 1024
    assert setting.smem_bytes(8) <= 227 * 1024
    if setting.mma:  # whole warps, split 2 x W/2 (one warp: 1 x 1) into 16x8 mma tiles
        warps = setting.group_threads // 32
        warps_m = 2 if warps >= 2 else 1
        assert setting.group_threads % 32 == 0 and warps in (1, 2, 4, 8)
        assert setting.blk_m % (16 * warps_m) == 0 and setting.blk_n % (8 * (warps // warps_m)) == 0
        assert setting.mma in (4, 8, 16) and setting.blk_k % setting.mma == 0
        assert setting.mma_stages_for(False) >= 2 and setting.mma_stages_for(True) >= 2


def test_settings_have_distinct_ids():
    assert len({str(s) for s in batched.GEMV_SETTINGS}) == len(batched.GEMV_SETTINGS)
    assert len({str(s) for s in batched.GEMM_SETTINGS}) == len(batched.GEMM_SETTINGS)


def test_trsv_and_vector_registries_hold_every_setting_dtype_and_layout():
    from batched import vector as vector_module
    from batched.factorizations import trsv as trsv_module

    reg = {path.name: names for path, names in registered().items()}
    assert reg["trsv.cu"] == ({trsv_module.kernel_name(layout, dt, s) for layout in LAYOUTS
                               for dt in batched.SUPPORTED_DTYPES for s in batched.TRSV_SETTINGS if not s.thread}
                              | {trsv_module.tile_kernel_name(layout, dt, w) for layout in LAYOUTS
                                 for dt in batched.SUPPORTED_DTYPES for w in trsv_module.TILE_LANES}
                              | {trsv_module.thread_kernel_name(layout, dt, nb) for layout in LAYOUTS
                                 for dt in batched.SUPPORTED_DTYPES for nb in trsv_module.THREAD_NB})
    assert reg["vector.cu"] == {name for dt in batched.SUPPORTED_DTYPES for s in batched.VECTOR_SETTINGS
                                for name in (vector_module._update_name(dt, s),
                                             *(vector_module._reduce_name(dt, s, op) for op in range(5)))}


# Each kernel source's launch flags and the Python constants that set them: (source,
# beside its module, macro prefix, module, the Python names (each _NAME is the macro PREFIX_NAME), bits
# the launch packs other fields into).  The TRSV thread design's first TRSV_VECS16
# was 16, which is op(A)'s bit 4: every transposed solve of every TRSV kernel read
# as a different op, and no CPU test could see it.
LAUNCH_FLAGS = [
    ("gemv.cu", "GEMV", "batched.gemv", ("CONJ", "READ_Y", "SKIP_PRODUCT"), 0),
    ("gemm.cu", "GEMM", "batched.gemm", ("READ_C", "SKIP_PRODUCT"), 0),
    ("kblas_gemv.cu", "KBLAS", "batched.kblas.gemv", ("CONJ", "READ_Y", "VEC", "XVEC"), 0),
    ("kblas_symv.cu", "KBLAS", "batched.kblas.symv", ("CONJ_A", "READ_Y", "LOWER", "HERMITIAN"), 0),
    ("kblas_mgpu.cu", "KBLAS_MGPU", "batched.kblas.mgpu", ("LOWER", "HERMITIAN"), 0),
    ("trsv.cu", "TRSV", "batched.factorizations.trsv",
     ("LOWER", "UNIT", "CHECK", "ROWS16", "VECS16"), 3 << 4),  # op(A) in bits 4..5
    ("lu.cu", "LU", "batched.factorizations.lu", ("A_TRANS", "WRITE_LU", "WRITE_PIV"), 0),
    ("cholesky.cu", "POTRF", "batched.factorizations.cholesky",
     ("LOWER", "INPLACE", "ZERO_OTHER", "CONJ_SOLVE"), 0),
]


@pytest.mark.parametrize("source, prefix, module, names, reserved", LAUNCH_FLAGS, ids=lambda v: str(v))
def test_launch_flags_agree_with_their_sources_and_do_not_overlap(source, prefix, module, names, reserved):
    import re
    from pathlib import Path

    mod = importlib.import_module(module)
    text = Path(mod.__file__).with_name(source).read_text()
    used = reserved
    for name in names:
        found = re.search(rf"^#define {prefix}_{name}\s+(\d+)\b", text, re.MULTILINE)
        assert found, f"{source} defines no {prefix}_{name}"
        value = int(found.group(1))
        assert getattr(mod, f"_{name}") == value, f"{module}._{name} != {prefix}_{name} = {value}"
        assert value & (value - 1) == 0 and value, f"{prefix}_{name} = {value} is not one bit"
        assert not value & used, f"{prefix}_{name} = {value} overlaps another flag or a packed field"
        used |= value
