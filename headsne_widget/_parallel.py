"""The lock around numba's parallel kernels.

numba's default threading layer without TBB or OpenMP (workqueue) aborts the process when two threads
launch parallel regions at once; the widget runs t-SNE, the P of a click and the atlas in different
threads, so every parallel launch holds this lock.
"""

from __future__ import annotations

import threading

KERNEL_LOCK = threading.Lock()
