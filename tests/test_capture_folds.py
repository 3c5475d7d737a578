"""The capture's folds (capture/folds/): the grid and the head scores as folds equal what the model's own dense
attention gives, a fold registered from outside is fed every chunk of every layer (captured or eager), and the
capture's options are one object checked before a model loads."""

from __future__ import annotations

import inspect
import itertools
import os

import numpy as np
import pytest
import torch

from headsne_widget import extract
from headsne_widget.capture import folds, layers
from headsne_widget.capture.extraction import CaptureOptions, extract_with
from headsne_widget.capture.folds import Fold, LayerShape, MaxAttentionGrid
from headsne_widget.capture.scores import head_scores
from headsne_widget.texts import TSNE_ABSTRACT

TEXT = " ".join(TSNE_ABSTRACT.split()[:60])


def dense_attentions(path: str, token_ids: np.ndarray) -> np.ndarray:
    """The oracle: float32 (L, H, n, n) from the model's own eager forward with ``output_attentions=True``."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(token_ids)[None], output_attentions=True)
    return torch.cat(out.attentions).float().numpy()


class Recorder(Fold):
    """Keeps every chunk it is fed, and pastes them into dense ``(H, n, n)`` layers."""

    name = "recorder"

    def start(self, layer: LayerShape) -> None:
        self.layer = layer
        self.dense = np.zeros((layer.n_heads, layer.n_tokens, layer.n_tokens), dtype=np.float32)
        self.chunks: list[tuple[slice, slice, torch.dtype]] = []

    def chunk(self, rows: slice, keys: slice, weights: torch.Tensor) -> None:
        assert weights.shape == (self.layer.n_heads, rows.stop - rows.start, keys.stop - keys.start)
        self.dense[:, rows, keys] = weights.cpu().numpy()
        self.chunks.append((rows, keys, weights.dtype))

    def end_layer(self) -> tuple[LayerShape, list, np.ndarray]:
        return self.layer, self.chunks, self.dense

    def finish(self, layers: list) -> list:
        return layers


@pytest.fixture
def recorded(monkeypatch):
    """``Recorder`` registered as a fold, as a new fold's module would register it (one entry of ``FOLDS``)."""
    monkeypatch.setattr(folds, "FOLDS", (*folds.FOLDS, Recorder))


def test_grid_fold_is_the_max_over_queries_of_the_models_own_attention(minilm_path):
    ex = extract(TEXT, minilm_path, device="cpu")
    A = dense_attentions(minilm_path, ex.token_ids)
    np.testing.assert_allclose(ex.max_attention, A.max(axis=2), atol=1e-5, rtol=0)  # float32, compounded by layer
    for layer in range(ex.n_layers):  # and bit for bit the max of the heads the capture recomputes
        heads = np.stack([ex.attention(layer, h) for h in range(ex.n_heads)])
        np.testing.assert_array_equal(ex.max_attention[layer], heads.max(axis=1))


def test_head_score_fold_equals_the_formulas_on_the_models_own_attention(minilm_path):
    ex = extract(TEXT, minilm_path, device="cpu")
    A = dense_attentions(minilm_path, ex.token_ids).astype(np.float64)
    n = ex.n_tokens
    i = np.arange(n)
    table = head_scores(ex).set_index(["layer", "head"])
    oracle = {
        "sink": A[..., :, 0].mean(axis=-1),
        "previous": A[..., i[1:], i[1:] - 1].mean(axis=-1),
        "self": A[..., i, i].mean(axis=-1),
        "local": (A * (np.abs(i[:, None] - i[None, :]) <= 3)).sum(axis=-1).mean(axis=-1),
        "future": (A * (i[None, :] > i[:, None])).sum(axis=-1).mean(axis=-1),
        "special": A[..., ex.special].sum(axis=-1).mean(axis=-1),
    }
    for name, values in oracle.items():
        np.testing.assert_allclose(table[name].to_numpy(), values.reshape(-1), atol=1e-6, rtol=0, err_msg=name)


def test_a_registered_fold_is_fed_every_chunk_of_every_layer(recorded, minilm_path, monkeypatch):
    monkeypatch.setattr(layers, "CHUNK_BYTES", 7 * 12 * 4 * 80)  # about 7 query rows a chunk: many chunks a layer
    ex = extract(TEXT, minilm_path, device="cpu")
    got = ex.folded["recorder"]
    assert [shape.index for shape, _, _ in got] == list(range(ex.n_layers)) == list(range(6))
    A = dense_attentions(minilm_path, ex.token_ids)
    for layer, (shape, chunks, dense) in enumerate(got):
        assert (shape.n_heads, shape.n_tokens) == (ex.n_heads, ex.n_tokens)
        assert len(chunks) > 5 and all(dtype == torch.float32 for _, _, dtype in chunks)
        rows = [r for r, _, _ in chunks]  # in query order, tiling the rows
        assert rows[0].start == 0 and rows[-1].stop == ex.n_tokens
        assert all(a.stop == b.start for a, b in itertools.pairwise(rows))
        for head in range(ex.n_heads):  # every weight the capture computed, as it hands the head out
            np.testing.assert_array_equal(dense[head], ex.attention(layer, head))
        np.testing.assert_allclose(dense, A[layer], atol=1e-5, rtol=0)  # float32 rounding, compounded layer after layer
    assert set(ex.folded) == {"recorder"}  # the grid and the scores have fields of their own


def test_a_registered_fold_is_fed_on_the_eager_path_too(recorded, bert_tokenizer, tmp_path):
    """A model outside transformers' AttentionInterface (DeBERTa-v2) runs eager; its dense heads feed the folds."""
    import transformers

    config = transformers.DebertaV2Config(vocab_size=bert_tokenizer.vocab_size, hidden_size=32, num_attention_heads=4,
                                          intermediate_size=64, num_hidden_layers=2, initializer_range=0.2)  # fmt: skip
    torch.manual_seed(0)
    transformers.DebertaV2Model(config).save_pretrained(tmp_path)
    bert_tokenizer.save_pretrained(tmp_path)
    ex = extract(TEXT, os.fspath(tmp_path), device="cpu")
    A = dense_attentions(os.fspath(tmp_path), ex.token_ids)
    got = ex.folded["recorder"]
    assert len(got) == 2
    for layer, (_, _, dense) in enumerate(got):
        np.testing.assert_array_equal(dense, ex.attentions[layer])
        np.testing.assert_allclose(dense, A[layer], atol=1e-5, rtol=0)  # float32 rounding, compounded layer after layer
    np.testing.assert_array_equal(ex.max_attention, ex.attentions.max(axis=2))
    assert ex.head_stats is not None  # folded with the rest, as the capture folds them


def test_options_are_one_object_checked_before_the_model_loads(minilm_path):
    keywords = set(inspect.signature(extract).parameters)
    assert keywords == {"text", "model", "tokenizer", "device", "max_tokens", "trust_remote_code", "progress",
                        "components", "rows"}  # fmt: skip
    for bad, error in [({"max_tokens": 0}, ValueError), ({"max_tokens": 2.5}, TypeError),
                       ({"components": 1}, TypeError), ({"progress": "yes"}, TypeError), ({"rows": "yes"}, TypeError),
                       ({"folds": (MaxAttentionGrid, int)}, TypeError), ({"folds": ()}, ValueError)]:  # fmt: skip
        with pytest.raises(error):
            CaptureOptions("/no/such/model", **bad)  # type: ignore[arg-type]
        if "folds" not in bad:
            with pytest.raises(error):
                extract(TEXT, "/no/such/model", **bad)
    ex = extract_with(TEXT, CaptureOptions(minilm_path, device="cpu", folds=(MaxAttentionGrid,)))
    same = extract(TEXT, minilm_path, device="cpu")
    np.testing.assert_array_equal(ex.max_attention, same.max_attention)
    assert ex.head_stats is None  # not folded: computed when asked, the same
    np.testing.assert_array_equal(head_scores(ex).drop(columns="kind"), head_scores(same).drop(columns="kind"))
