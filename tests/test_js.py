"""The front end's own tests: node's test runner over js/**/*.test.js, its linters (npm run lint), and
the JS halves of the mirrored pairs (array codec, quantile-equidistant rescaling) checked against
their Python definitions."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from headsne_widget.embedding.rescaling import quantile_rescale
from headsne_widget.widget.serialization import array_to_wire

ROOT = Path(__file__).resolve().parents[1]


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed: the front end needs Node.js (see .ci/setup)")
    if not (ROOT / "node_modules" / "d3-array").is_dir():
        pytest.fail("node_modules is missing: run `npm install` in the repository root")
    return node


def _run_node(script: str, tmp_path: Path) -> str:
    """Run an ES module script with the repository root as working directory; return its stdout."""
    path = tmp_path / "check.mjs"
    path.write_text(script)
    proc = subprocess.run([_node(), str(path)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_npm_test_passes() -> None:
    _node()
    npm = shutil.which("npm")
    assert npm is not None, "npm is not installed"
    proc = subprocess.run([npm, "test", "--silent"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, report
    passed = int(report.split("# pass ")[1].split()[0])
    assert passed >= 25, report
    assert "# fail 0" in report, report


def test_npm_lint_passes() -> None:
    """eslint, prettier --check and tsc --checkJs (the trait types of js/model/model.js) are clean."""
    _node()
    npm = shutil.which("npm")
    assert npm is not None, "npm is not installed"
    if not (ROOT / "node_modules" / ".bin" / "eslint").exists():
        pytest.fail("the JS linters are missing: run `npm install` in the repository root")
    proc = subprocess.run([npm, "run", "lint", "--silent"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_codec_decodes_what_python_encodes(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    frame = (rng.standard_normal((37, 2)) * 10.0 ** rng.integers(-5, 3, (37, 1))).astype(np.float64)
    indices = rng.integers(0, 37, (37, 5))
    wires = {"frame": array_to_wire(frame), "indices": array_to_wire(indices)}
    for name, wire in wires.items():
        (tmp_path / f"{name}.bin").write_bytes(wire["buffer"])
    meta = {name: {"dtype": w["dtype"], "shape": w["shape"]} for name, w in wires.items()}
    codecs = (ROOT / "js" / "model" / "codecs.js").as_uri()
    out = _run_node(
        f"""
import {{ readFileSync }} from "node:fs";
import {{ decodeArray }} from "{codecs}";
const meta = {json.dumps(meta)};
const result = {{}};
for (const [name, m] of Object.entries(meta)) {{
  const bytes = readFileSync({json.dumps(str(tmp_path))} + "/" + name + ".bin");
  const a = decodeArray({{ ...m, buffer: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength) }});
  result[name] = {{ type: a.data.constructor.name, shape: a.shape, data: Array.from(a.data) }};
}}
console.log(JSON.stringify(result));
""",
        tmp_path,
    )
    got = json.loads(out)
    assert got["frame"]["type"] == "Float32Array"
    assert got["frame"]["shape"] == [37, 2]
    np.testing.assert_array_equal(np.array(got["frame"]["data"]).reshape(37, 2), frame.astype(np.float32))
    assert got["indices"]["type"] == "Int32Array"
    np.testing.assert_array_equal(np.array(got["indices"]["data"]).reshape(37, 5), indices)


def _js_quantile_rescale(values: np.ndarray, k: int, tmp_path: Path) -> np.ndarray:
    layout = (ROOT / "js" / "lib" / "rescaling.js").as_uri()
    (tmp_path / "values.json").write_text(json.dumps(values.tolist()))
    out = _run_node(
        f"""
import {{ readFileSync }} from "node:fs";
import {{ quantileRescale }} from "{layout}";
const x = JSON.parse(readFileSync({json.dumps(str(tmp_path / "values.json"))}, "utf8"));
console.log(JSON.stringify(Array.from(quantileRescale(x, {k}))));
""",
        tmp_path,
    )
    return np.array(json.loads(out))


@pytest.mark.parametrize("k", [2, 5, 100, 250])
def test_js_quantile_rescaling_is_the_thesis_definition(k: int, tmp_path: Path) -> None:
    # heavy-tailed, no ties: phi is interp(x, quantiles, levels) exactly
    rng = np.random.default_rng(k)
    x = rng.standard_cauchy(190)
    levels = np.linspace(0.0, 1.0, k)
    expected = np.interp(x, np.quantile(x, levels), levels)
    np.testing.assert_allclose(_js_quantile_rescale(x, k, tmp_path), expected, rtol=0, atol=1e-12)


def test_js_quantile_rescaling_matches_the_python_function(tmp_path: Path) -> None:
    """The scatter's quantile axes (js/lib/rescaling.js) and headsne_widget.embedding.rescaling place points
    identically."""
    rng = np.random.default_rng(1)
    Y = np.stack([rng.standard_cauchy(120), rng.exponential(size=120) ** 3, np.full(120, 4.0)], axis=1)
    Y[:15, 0] = 0.0  # ties inside the data
    Y[15:60, 1] = Y[:, 1].min()  # ties at the low end
    k = 40
    rescaled = np.asarray(quantile_rescale(Y, k=k)[0], dtype=np.float64)
    for axis in range(3):
        got = _js_quantile_rescale(Y[:, axis], k, tmp_path)
        np.testing.assert_allclose(got, rescaled[:, axis], rtol=0, atol=1e-9)
