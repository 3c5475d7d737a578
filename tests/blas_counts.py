"""What threadpoolctl reads of numpy's own BLAS: the library the package's products call (scipy and torch bring
their own, with counts of their own)."""

from __future__ import annotations

import os

import numpy as np


def numpy_blas_threads() -> list[int]:
    """The thread counts of numpy's own BLAS, as threadpoolctl reads them."""
    from threadpoolctl import threadpool_info

    numpy_dir = os.path.dirname(os.path.dirname(np.__file__))
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas" and "numpy" in lib["filepath"]
            and lib["filepath"].startswith(numpy_dir)]  # fmt: skip
