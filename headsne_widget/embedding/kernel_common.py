"""What the compiled CPU kernels of t-SNE share (:mod:`.kernels`, :mod:`.kl_kernels`,
:mod:`.interpolation_kernels`): the compiler's flags, the floating-point environment of a pass, the shares
of the rows for the worker threads, and the optimiser's constants (the engines read them too).

``fastmath`` allows re-association and reciprocals but not ``nnan``/``ninf``, so non-finite values are
never assumed away. ``error_model="numpy"`` everywhere: numba's default "python" model guards each division
with a ZeroDivisionError check, which stops LLVM from vectorising the pair loop (2.1 against 0.19 ns per pair,
serial, n = 2048).

Points that converge onto each other (tokens with identical rows of P) make |y_i - y_j|^2 and
p_ij w_ij (y_i - y_j) subnormal, which x86 CPUs handle in microcode, 10-100 times slower. Each row
therefore runs with flush-to-zero / denormals-are-zero set in MXCSR and restores the caller's MXCSR
afterwards, so nothing outside these kernels sees the change (elsewhere the flags are no-ops).

Every kernel releases the GIL (``nogil``): a run computes in its own thread while the kernel's main thread
handles the browser's messages, and a call of the serial steps holds up to a frame period of work (16 ms
at 512 tokens) during which, with the GIL held, a head click's message could not even be read.
"""

from __future__ import annotations

import platform
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["FASTMATH", "KL_BIG_RATIO", "MAX_STEP_NORM", "MIN_GAIN", "SHARES", "flush_denormals", "restore_fp_state"]

# The optimiser's constants: the compiled kernels (:mod:`.kernels`) and the engines that call them
# (:mod:`.engines`) both read them, so they live here, below both (kernels once imported MAX_STEP_NORM from
# engines, which imports kernels: a circle).
#: smallest per-parameter gain (the reference implementation's and scikit-learn's)
MIN_GAIN = 0.01
#: longest step a point takes in one iteration (openTSNE's ``max_step_norm``, default 5). With the learning rate
#: n / early_exaggeration, points far out take steps of tens of units after the optimiser's restart at the end of
#: exaggeration and the layout never recovers: a top-64 sparse head P at 8192 points ended at exact KL 4.641 /
#: 4.657 (seeds 0 / 1) without the cut, 4.344 / 4.322 with it; openTSNE (which keeps its gains) 4.548.
MAX_STEP_NORM = 5.0
#: q / p beyond which p h(q / p) is q to float32 precision (see ``kl_kernels.kl_rows_serial``)
KL_BIG_RATIO = 1e30

FASTMATH = {"reassoc", "contract", "arcp", "nsz"}
_FTZ_DAZ = 0x8040  # MXCSR bits 15 (flush to zero) and 6 (denormals are zero)

#: shares of the rows :func:`.kernels.forces` and :func:`.kl_kernels.kl_rows` hand to the worker threads (a
#: multiple of four rows each)
SHARES = 16


def _mxcsr_call(builder: Any, name: str, slot: Any) -> None:
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [slot.type]), name)
    builder.call(fn, [slot])


if platform.machine().lower() in {"x86_64", "amd64"}:

    @intrinsic
    def flush_denormals(typingctx):
        """Set FTZ and DAZ on this thread; return the previous MXCSR for :func:`restore_fp_state`."""

        def codegen(context, builder, sig, args):
            slot = cgutils.alloca_once(builder, ir.IntType(32))
            _mxcsr_call(builder, "llvm.x86.sse.stmxcsr", slot)
            old = builder.load(slot)
            builder.store(builder.or_(old, ir.Constant(ir.IntType(32), _FTZ_DAZ)), slot)
            _mxcsr_call(builder, "llvm.x86.sse.ldmxcsr", slot)
            return old

        return types.uint32(), codegen

    @intrinsic
    def restore_fp_state(typingctx, old):
        """Load the MXCSR saved by :func:`flush_denormals`."""

        def codegen(context, builder, sig, args):
            _mxcsr_call(builder, "llvm.x86.sse.ldmxcsr", cgutils.alloca_once_value(builder, args[0]))
            return context.get_dummy_value()

        return types.void(types.uint32), codegen

else:  # other CPUs handle subnormals at full speed or flush them already

    @njit(inline="always")
    def flush_denormals():  # pragma: no cover - not x86
        return np.uint32(0)

    @njit(inline="always")
    def restore_fp_state(old):  # pragma: no cover - not x86
        return None
