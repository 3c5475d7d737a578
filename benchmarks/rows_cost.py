"""What keeping the rows at capture costs against what it saves (issue 55): ``rows="auto"``'s threshold.

One process per size: benchmarks/long_capture.py's tiny causal Llama (2 layers x 4 heads) on seeded random ids;
the capture with ``rows=False`` and ``rows=True`` interleaved (``--repeats`` each), then one head's rows as a P
asks for them (mass 0.99, at most ``ROW_KEYS`` keys a row): recomputed from the queries and keys (the extraction
without rows) and read from the kept rows. Printed: the median capture times, their difference (what keeping
the rows costs), the head's recompute and read times, and the cost over one recompute.

    python benchmarks/rows_cost.py [--sizes 2048 4096 16384] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def child(path: str, n: int, repeats: int) -> None:
    from headsne_widget.capture.extraction import extract_token_ids, load_model
    from headsne_widget.capture.folds.rows import ROW_KEYS

    loaded = load_model(path, device="cpu")
    ids = np.random.default_rng(0).integers(1000, loaded.tokenizer.vocab_size, size=n)
    extract_token_ids(ids[:512], loaded, rows=True)  # (imports and compiled kernels)
    times: dict[bool, list[float]] = {False: [], True: []}
    made = {}
    for _ in range(repeats):
        for rows in (False, True):
            made.pop(rows, None)
            t = time.perf_counter()
            made[rows] = extract_token_ids(ids, loaded, rows=rows)
            times[rows].append(time.perf_counter() - t)
    head = {}
    for rows in (False, True):
        t = time.perf_counter()
        made[rows].sparse_attention(1, 2, 0.99, max_keys=ROW_KEYS)
        head[rows] = time.perf_counter() - t
    off, on = float(np.median(times[False])), float(np.median(times[True]))
    print(json.dumps(dict(n=n, capture_off_s=round(off, 2), capture_rows_s=round(on, 2), ratio=round(on / off, 3),
                          cost_s=round(on - off, 2), head_recompute_s=round(head[False], 3),
                          head_read_s=round(head[True], 3), cost_in_head_changes=round((on - off) / head[False], 2),
                          load=round(os.getloadavg()[0], 1))), flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2048, 4096, 16384])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.repeats)
        return
    from long_capture import build

    with tempfile.TemporaryDirectory() as directory:
        path = build(directory, None, max(4096, *args.sizes), heads=4)
        for n in args.sizes:
            command = [sys.executable, __file__, "--child", path, str(n), "--repeats", str(args.repeats)]
            subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
