"""Issue 32, findings 7 to 10: tiny texts, huge texts, the sparse engine's exact KL and clear errors for bad
input, each a regression test that failed before its fix."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from headsne_widget import attention_affinities, embedding, extract, tsne
from headsne_widget.capture.extraction import LoadedModel


def test_default_tsne_converges_on_every_minilm_head_of_a_tiny_text(minilm: LoadedModel):
    """Finding 7: the floor of 5 on the 'auto' learning rate made a tiny text's steps 60 / n times too large;
    12 of the 72 heads of a 4-token text raised TSNEDivergedError with the defaults."""
    for words in range(2, 9):  # n = 4 to 10 tokens with [CLS] and [SEP]
        ex = extract(" ".join("abcdefgh"[:words]), minilm)
        for layer in range(6):
            for head in range(12):
                P = attention_affinities(ex.attention(layer, head))
                assert P.shape == (words + 2, words + 2)
                res = tsne(P, seed=0)
                assert np.isfinite(res.kl) and res.learning_rate == pytest.approx((words + 2) / 12)


def _local_imports(path: Path, package: str) -> set[str]:
    """The modules of ``package`` that the module at ``path`` imports, at any depth (lazy imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module] if node.module else [alias.name for alias in node.names]
            found.update(f"{package}.{name.split('.')[0]}" for name in names)
    return found


def test_the_embedding_modules_import_each_other_without_a_circle():
    """engines imported kernels (lazily) and kernels imported MAX_STEP_NORM from engines: the optimiser's
    constants now live in kernel_common, below both."""
    folder = Path(embedding.__file__).parent
    graph = {f"embedding.{p.stem}": _local_imports(p, "embedding") for p in folder.glob("*.py")}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    circular = sorted(module for module in graph if reaches(module, module, set()))
    assert circular == []
    from headsne_widget.embedding import engines, kernel_common

    assert engines.MAX_STEP_NORM is kernel_common.MAX_STEP_NORM == 5.0  # still importable where it was
