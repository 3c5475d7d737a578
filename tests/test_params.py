"""HeadSNE's parameters as tools see them: the signature ``help(HeadSNE)`` shows, the TypedDict mypy checks calls
against (both generated from widget/protocol.py), and ``wait``'s timeout checked at the boundary."""

from __future__ import annotations

import inspect
import math
import textwrap
from pathlib import Path

import pytest

from headsne_widget.widget.headsne import HeadSNE
from headsne_widget.widget.model import HeadSNEModel
from headsne_widget.widget.params import HeadSNEParams, SyncedTraits
from headsne_widget.widget.protocol import KEYWORDS, TRAITS

ROOT = Path(__file__).resolve().parents[1]


def test_help_lists_every_keyword_with_its_type_and_default():
    parameters = inspect.signature(HeadSNE).parameters
    assert "params" not in parameters and list(parameters)[:2] == ["text", "model"]
    assert [name for name in parameters if name in KEYWORDS] == list(KEYWORDS)
    for spec in TRAITS:
        if spec.keyword:
            p = parameters[spec.name]
            assert p.kind is inspect.Parameter.KEYWORD_ONLY, spec.name
            assert p.annotation == HeadSNEParams.__annotations__[spec.name].__forward_arg__, spec.name
            if spec.name != "grid_norm":  # chosen when the text is loaded: above_uniform for causal models
                assert p.default == spec.trait.default_value, spec.name
    assert parameters["perplexity"].annotation == "float" and parameters["perplexity"].default == 20.0
    assert "causal" in repr(parameters["grid_norm"].default)
    assert "perplexity: 'float' = 20.0" in str(inspect.signature(HeadSNE))  # what help(HeadSNE) prints


def test_every_trait_is_declared_for_tools():
    """HeadSNEModel's traits (put in its class body from protocol.TRAITS) are each declared, typed, by the generated
    SyncedTraits it derives from: mypy and IDEs see them without a __getattr__ fallback."""
    assert issubclass(HeadSNEModel, SyncedTraits)
    assert list(SyncedTraits.__annotations__) == [spec.name for spec in TRAITS]
    assert "__getattr__" not in vars(HeadSNEModel)
    assert SyncedTraits.__annotations__["layer"] == "int" and SyncedTraits.__annotations__["kl"] == "float | None"


def _mypy(tmp_path: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    api = pytest.importorskip("mypy.api")
    monkeypatch.setenv("MYPYPATH", str(ROOT))  # the package's source (installed, it carries no py.typed)
    snippet = tmp_path / "snippet.py"
    snippet.write_text("from headsne_widget.widget.headsne import HeadSNE\n\ntext = 'a text'\n" + textwrap.dedent(body))
    out, err, status = api.run([str(snippet), "--follow-imports=silent", "--config-file", str(ROOT / "pyproject.toml"),
                                "--cache-dir", str(ROOT / ".mypy_cache"), "--no-error-summary"])  # fmt: skip
    return out + err, status


def test_mypy_checks_the_keywords(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    report, status = _mypy(
        tmp_path,
        """
        HeadSNE(text, perplexity="x")
        HeadSNE(text, perplxity=30.0)
        HeadSNE(text, mode="heads")
        HeadSNE(text, color_mode="rainbow")
        """,
        monkeypatch,
    )
    assert status == 1, report
    lines = report.splitlines()
    assert any(":5:" in line and "perplexity" in line and '"str"' in line for line in lines), report
    assert any(":6:" in line and "perplxity" in line for line in lines), report
    assert any(":7:" in line and "mode" in line for line in lines), report
    assert any(":8:" in line and "color_mode" in line for line in lines), report
    report, status = _mypy(
        tmp_path,
        """
        HeadSNE(text, perplexity=30, learning_rate="auto", n_iter=500, color_mode="kind", mode="query-key")
        HeadSNE(text, layer=2, head=5, grid_norm="raw", sort_heads="sink", quantile=True)
        """,
        monkeypatch,
    )
    assert status == 0, report


def test_mypy_checks_the_attributes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A HeadSNE's synced attributes as mypy sees them: typed (``w.kl`` a float or None, ``w.mode`` one of the
    modes), those a user may set checked against their type, the others read-only (``w.kl = 0.5`` is an error, as
    it is at run time): the same generated properties run and are checked."""
    report, status = _mypy(
        tmp_path,
        """
        w = HeadSNE(text)
        reveal_type(w.kl)
        w.kl = 0.5
        w.perplexity = "x"
        w.layer, w.head, w.mode = 2, 5, "hidden"
        reveal_type(w.state)
        w.mode = "heads"
        """,
        monkeypatch,
    )
    lines = report.splitlines()
    assert any(":6:" in line and 'Revealed type is "float | None"' in line for line in lines), report
    assert any(":7:" in line and "read-only" in line for line in lines), report
    assert any(":8:" in line and '"str"' in line and '"float"' in line for line in lines), report
    assert not any(":9:" in line for line in lines), report
    assert any(":10:" in line and "Literal['loading']" in line for line in lines), report
    assert any(":11:" in line and "\"Literal['heads']\"" in line for line in lines), report  # a mode, not any str


@pytest.mark.parametrize("method", ["wait", "wait_ready"])
@pytest.mark.parametrize("timeout", ["1", True, [1], b"1"])
def test_wait_refuses_a_timeout_that_is_no_number(make, abstract_ex, timeout, method):
    w, _ = make(abstract_ex, autostart=False)
    with pytest.raises(TypeError, match="timeout must be None or a number of seconds"):
        getattr(w, method)(timeout=timeout)


@pytest.mark.parametrize("method", ["wait", "wait_ready"])
@pytest.mark.parametrize("timeout", [-1, -0.5, math.inf, math.nan])
def test_wait_refuses_a_negative_or_infinite_timeout(make, abstract_ex, timeout, method):
    w, _ = make(abstract_ex, autostart=False)
    with pytest.raises(ValueError, match="finite number of seconds >= 0"):
        getattr(w, method)(timeout=timeout)


def test_wait_takes_none_and_numbers(make, abstract_ex):
    import numpy as np

    w, _ = make(abstract_ex, autostart=False)
    for timeout in (None, 0, 2, 0.5, np.float32(1.0), np.int64(1)):
        assert w.wait(timeout=timeout) is None  # nothing ran
