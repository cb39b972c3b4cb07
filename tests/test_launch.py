"""Kept launches (batched._launch.PackedLaunch) without a GPU: the driver call is
replaced by one that copies out what each argument slot holds, as cuLaunchKernel
does when it enqueues, so the bytes a replay hands the kernel are checked here."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from batched import _launch as ln


@pytest.fixture
def captured(monkeypatch):
    """The launches the driver was asked for: (function, dims, stream, extra, [bytes an argument])."""
    pytest.importorskip("cupy")
    import cupy.cuda
    from cupy_backends.cuda.api import driver

    found = _Launches()

    def launch_kernel(function, gx, gy, gz, bx, by, bz, shared_mem, stream, params, extra):
        sizes = found.sizes
        slots = (ctypes.c_uint64 * len(sizes)).from_address(params)
        found.append((function, (gx, gy, gz, bx, by, bz, shared_mem), stream, extra,
                      [ctypes.string_at(slots[i], n) for i, n in enumerate(sizes)]))

    class Stream:
        ptr = 0x5150

    monkeypatch.setattr(driver, "launchKernel", launch_kernel)
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda: Stream())
    return found


class _Launches(list):
    """The captured launches; ``sizes``: the bytes of each argument, set by the test."""

    sizes: tuple = ()


class _Kernel:
    """What PackedLaunch needs of a cupy.RawKernel: its Function's address."""

    class kernel:  # noqa: N801 (the attribute's name in CuPy)
        ptr = 0xF00D


def test_a_replay_writes_its_pointers_and_scalars_and_keeps_every_other_argument(captured):
    matrix = ln.pack("UniformMatrix", 0x1000, 64, 8, 8, 8)
    args = (matrix, ln.pack("UniformVector", 0x2000, 8, 1), np.float32(1.5), np.complex128(2 + 3j),
            np.int32(7), np.int64(-9), np.uint64(0x3000))
    captured.sizes = tuple(a.nbytes for a in args)
    launch = ln.PackedLaunch(_Kernel(), (5,), 128, 4096, args,
                             [(0, "A"), (2, "alpha"), (3, "beta"), (6, "work")])
    first = {"A": 0xA0000, "alpha": np.float32(0.25), "beta": np.complex128(1 - 2j), "work": 0xB0000}
    second = {"A": 0xC0000, "alpha": np.float32(-4.0), "beta": np.complex128(0), "work": 0xD0000}
    launch(first)
    launch(second)
    for (function, dims, stream, extra, got), values in zip(captured, (first, second)):
        assert (function, dims, stream, extra) == (0xF00D, (5, 1, 1, 128, 1, 1, 4096), 0x5150, 0)
        assert got == [ln.pack("UniformMatrix", values["A"], 64, 8, 8, 8).tobytes(),
                       args[1].tobytes(),                    # unbound: as recorded
                       values["alpha"].tobytes(), values["beta"].tobytes(),
                       args[4].tobytes(), args[5].tobytes(),
                       np.uint64(values["work"]).tobytes()]


def test_a_launch_takes_only_numpy_scalars_and_structs(captured):
    with pytest.raises(TypeError, match="argument 1 is a int"):
        ln.PackedLaunch(_Kernel(), 1, 32, 0, (np.int32(1), 7), [])


class _PlannedKernel:
    """Stands in for a CuPy RawKernel: records the opt-in and the launch."""
    num_regs = 64

    def __init__(self):
        self.max_dynamic_shared_size_bytes = None
        self.calls = []

    def __call__(self, grid, block, args, shared_mem=0):
        self.calls.append((grid, block, args, shared_mem))


class _Plan:
    def __init__(self, grid, block, smem):
        self.grid, self.block, self.smem = grid, block, smem


@pytest.mark.parametrize("smem, opted", [(0, None), (48 * 1024, None), (48 * 1024 + 16, 48 * 1024 + 16)])
def test_a_planned_launch_opts_in_past_48_kib_only(smem, opted):
    kernel = _PlannedKernel()
    ln.launch_planned(kernel, _Plan(5000, 128, smem), (np.int32(3),))
    assert kernel.max_dynamic_shared_size_bytes == opted
    assert kernel.calls == [((5000,), (128,), (np.int32(3),), smem)]


def test_a_resident_planned_launch_cuts_the_grid_to_the_blocks_the_gpu_holds(monkeypatch):
    from batched import settings

    asked = []

    def resident_blocks(block, smem, registers=0):
        asked.append((block, smem, registers))
        return 264

    monkeypatch.setattr(settings, "resident_blocks", resident_blocks)
    kernel = _PlannedKernel()
    ln.launch_planned(kernel, _Plan(5000, 128, 1024), (), resident=True)
    ln.launch_planned(kernel, _Plan(100, 128, 1024), (), resident=True)
    ln.launch_planned(kernel, _Plan(5000, 128, 1024), ())
    assert [c[0] for c in kernel.calls] == [(264,), (100,), (5000,)]
    assert asked == [(128, 1024, 64), (128, 1024, 64)]  # with the kernel's registers
