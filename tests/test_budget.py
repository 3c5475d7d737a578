"""The memory budget of sparse rows and sparse P (issue 32): ``max_keys`` / ``max_entries`` against a numpy oracle
that sorts each row, ties to the lower column, the budget's rule, the kNN P's bound, and a child process under an
address-space limit that asks for a broad head's rows and gets a refusal or a capped result, never a kill."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from headsne_widget import budget
from headsne_widget.affinity import neighbours as knn
from headsne_widget.affinity.knn import knn_gaussian_affinities
from headsne_widget.affinity.sparse import largest_entries
from headsne_widget.capture.sparse import SparseRows, sparse_from_dense
from headsne_widget.errors import MemoryBudgetError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def uniform_causal(n: int) -> np.ndarray:
    """The broadest causal head: row i is 1/(i+1) on columns 0..i (every entry of a row tied)."""
    return np.tril(np.ones((n, n), np.float32)) / np.arange(1, n + 1, dtype=np.float32)[:, None]


def peaked(n: int, seed: int = 0) -> np.ndarray:
    """A causal softmax head with sharp rows (a few keys hold most of each row), float32."""
    logits = np.random.default_rng(seed).normal(scale=4.0, size=(n, n))
    logits[np.triu_indices(n, 1)] = -np.inf
    w = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (w / w.sum(axis=1, keepdims=True)).astype(np.float32)


def oracle(A: np.ndarray, mass: float, max_keys: int | None = None) -> tuple[list[np.ndarray], np.ndarray]:
    """Each row's kept columns (increasing) and share kept, by sorting the whole row: value down, column up."""
    columns, shares = [], np.ones(A.shape[0])
    for i, row in enumerate(A.astype(np.float64)):
        order = np.lexsort((np.arange(row.size), -row))
        values = row[order]
        total = row.sum()
        positives = int((values > 0).sum())
        if mass >= 1:
            count = positives
        else:
            reached = np.flatnonzero(np.cumsum(values) >= mass * total * (1 - 1e-12))
            count = min(int(reached[0]) + 1 if reached.size else positives, positives)
        count = count if max_keys is None else min(count, max_keys)
        columns.append(np.sort(order[:count]))
        if count and total > 0:
            shares[i] = np.cumsum(values[:count])[-1] / total
    return columns, shares


def assert_rows(S, A: np.ndarray, mass: float, max_keys: int | None) -> None:
    columns, shares = oracle(A, mass, max_keys)
    for i, expected in enumerate(columns):
        got = S.indices[S.indptr[i] : S.indptr[i + 1]]
        np.testing.assert_array_equal(got, expected, err_msg=f"row {i}")
        np.testing.assert_array_equal(S.data[S.indptr[i] : S.indptr[i + 1]], A[i, expected].astype(S.dtype))
    np.testing.assert_allclose(S.kept, shares, rtol=1e-12)


@pytest.mark.parametrize("head", ["uniform", "peaked"])
@pytest.mark.parametrize("mass", [0.5, 0.99, 1.0])
@pytest.mark.parametrize("max_keys", [None, 1, 7, 64])
def test_rows_are_the_oracles_with_max_keys(head, mass, max_keys):
    """Both selections (the capture's from a dense head, affinity's ``largest_entries``) keep the oracle's entries:
    at most ``max_keys`` of each row's largest, ties to the lower column, ``kept`` the share really kept."""
    A = uniform_causal(300) if head == "uniform" else peaked(300)
    assert_rows(sparse_from_dense(A, mass, max_keys=max_keys), A, mass, max_keys)
    assert_rows(largest_entries(A, mass, max_keys=max_keys), A, mass, max_keys)


def test_ties_go_to_the_lower_column_in_both_selections():
    """Issue 32 finding 5: on a uniform causal head ``largest_entries(A, 0.5)`` and ``sparse_from_dense(A, 0.5)``
    differed in 69 of 271 rows (argpartition dropped tied entries arbitrarily)."""
    A = uniform_causal(271)
    L, S = largest_entries(A, 0.5), sparse_from_dense(A, 0.5)
    columns, _ = oracle(A, 0.5)
    for i in range(A.shape[0]):
        np.testing.assert_array_equal(L.indices[L.indptr[i] : L.indptr[i + 1]], columns[i])
        np.testing.assert_array_equal(S.indices[S.indptr[i] : S.indptr[i + 1]], columns[i])
    # a cut inside a tie group that topk's first candidates only partly hold: 3 of 40 equal entries after a peak
    row = np.zeros((1, 200), np.float32)
    row[0, 10:200:5], row[0, 151] = 0.0125, 0.5
    for cap in (1, 3, 17):
        assert_rows(sparse_from_dense(row, 0.99, max_keys=cap), row, 0.99, cap)


def test_without_bounds_the_rows_are_unchanged():
    A = peaked(257, seed=3)
    for mass in (0.9, 0.99):
        plain, bounded = sparse_from_dense(A, mass), sparse_from_dense(A, mass, max_keys=257, max_entries=257 * 257)
        assert (plain != bounded).nnz == 0 and np.array_equal(plain.kept, bounded.kept)


def test_max_entries_refuses_at_the_first_chunk_whose_extrapolation_exceeds_it():
    """The refusal comes from the chunk where entries so far, extrapolated linearly over the rows left, first pass
    the limit (computed here by hand), not after every row was computed; it names the head, the estimate, what to
    set, and carries needed_entries / needed_bytes."""
    n, step, limit = 512, 32, 60_000
    A = uniform_causal(n)
    rows = SparseRows(n, 0.99, max_entries=limit, label="layer 1 head 2")
    kept = np.array([len(c) for c in oracle(A, 0.99)[0]])
    entries = np.cumsum(kept)[step - 1 :: step]
    done = np.arange(step, n + 1, step)
    estimates = entries + np.ceil(entries / done * (n - done)).astype(int)
    first = int(np.argmax(estimates > limit))
    assert 0 < first < len(done) - 1  # (the case tests something: neither the first chunk nor the last)
    for j, start in enumerate(range(0, n, step)):
        chunk = slice(start, start + step)
        if j < first:
            rows.add(chunk, slice(0, n), torch.from_numpy(A[chunk]))
            continue
        with pytest.raises(MemoryBudgetError) as refused:
            rows.add(chunk, slice(0, n), torch.from_numpy(A[chunk]))
        break
    error = refused.value
    assert (
        error.needed_entries == estimates[first] and error.needed_bytes == estimates[first] * budget.SPARSE_ENTRY_BYTES
    )
    for part in ("layer 1 head 2", f"{estimates[first]:,} entries", "mass", "max_keys=", "set_memory_budget"):
        assert part in str(error)


@pytest.mark.parametrize("select", [sparse_from_dense, largest_entries])
def test_max_entries_at_the_exact_need_passes_and_one_less_is_refused(select):
    A = peaked(300, seed=1)
    need = sum(len(c) for c in oracle(A, 0.9)[0])
    assert_rows(select(A, 0.9, max_entries=need), A, 0.9, None)
    with pytest.raises(MemoryBudgetError):
        select(A, 0.9, max_entries=need - 1)
    with pytest.raises(ValueError, match="max_keys"):
        select(A, 0.9, max_keys=0)


# ---------------------------------------------------------------------------------------- the budget's rule


def run_child(code: str, limit: int | None = None, timeout: float = 120, env: dict | None = None) -> dict:
    """Run ``code`` in a fresh python (under RLIMIT_AS ``limit`` bytes), return the JSON its last line prints."""

    def cap() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=cap,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, f"child ended with {result.returncode}: {result.stderr[-3000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_budget_is_a_share_of_what_this_process_can_still_get():
    """Under RLIMIT_AS the budget is BUDGET_SHARE of the address space left (read from /proc here, by hand);
    set_memory_budget and HEADSNE_MEMORY_BUDGET override it."""
    code = """
        import json, re, resource
        from headsne_widget import budget
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        status, meminfo = open("/proc/self/status").read(), open("/proc/meminfo").read()
        vm = int(re.search(r"VmSize:\\s+(\\d+) kB", status).group(1)) * 1024
        free = int(re.search(r"MemAvailable:\\s+(\\d+) kB", meminfo).group(1)) * 1024
        got = budget.memory_budget_bytes()
        budget.set_memory_budget(12345)
        fixed = budget.memory_budget_bytes()
        print(json.dumps(dict(got=got, expected=0.5 * min(free, soft - vm), fixed=fixed)))
    """
    out = run_child(code, limit=2 * 2**30)
    assert budget.BUDGET_SHARE == 0.5
    assert out["got"] == pytest.approx(out["expected"], rel=0.02) and out["got"] < 2**30
    assert out["fixed"] == 12345
    env = run_child("import json; from headsne_widget import budget; print(json.dumps(budget.memory_budget_bytes()))",
                    env={"HEADSNE_MEMORY_BUDGET": "1.5G"})  # fmt: skip
    assert env == int(1.5 * 2**30)
    assert budget.parse_bytes("512MiB") == 2**29 and budget.parse_bytes("1000") == 1000
    assert budget.entries_within(720) == 720 // budget.SPARSE_ENTRY_BYTES
    with pytest.raises(ValueError, match="HEADSNE_MEMORY_BUDGET"):
        budget.parse_bytes("lots")


def test_sparse_entry_bytes_covers_the_measured_peak():
    """SPARSE_ENTRY_BYTES is the peak bytes a kept entry costs from the rows to P and the engine's reordered copy
    of P (budget.py says how it was measured); measured again here at 4096 tokens in a fresh process: not above
    the constant, nor far below."""
    code = """
        import json, resource
        import torch
        import numpy as np
        from scipy.sparse.csgraph import reverse_cuthill_mckee
        from headsne_widget.affinity.sparse import check_sparse_affinities, permuted, sparse_attention_affinities
        from headsne_widget.capture.sparse import SparseRows

        def rss():
            return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()

        def uniform_rows(n):
            rows = SparseRows(n, 0.99)
            for a in range(0, n, 64):
                b = min(a + 64, n)
                i, j = torch.arange(a, b)[:, None], torch.arange(b)[None, :]
                rows.add(slice(a, b), slice(0, b), torch.where(j <= i, 1.0 / (i + 1).float(), torch.zeros(())))
            return rows.build()

        def reordered(P):  # the sparse engine's copy of P (REORDER_MIN_N points and more), P kept beside it
            order = reverse_cuthill_mckee(P, symmetric_mode=True).astype(np.int64)
            return permuted(check_sparse_affinities(P, np.float32, check=False), order)

        reordered(sparse_attention_affinities(uniform_rows(64))[0])  # numba compiled and run
        before = rss()
        S = uniform_rows(4096)
        P, _ = sparse_attention_affinities(S)
        R = reordered(P)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps(dict(per_entry=(peak - before) / S.nnz, nnz=S.nnz)))
    """
    out = run_child(code)
    assert out["nnz"] == sum(int(np.ceil(0.99 * (i + 1) * (1 - 1e-12))) for i in range(4096))
    assert budget.SPARSE_ENTRY_BYTES / 2 < out["per_entry"] <= budget.SPARSE_ENTRY_BYTES


# ---------------------------------------------------------------------------------------- the kNN P


def test_knn_p_stores_no_zeros():
    """Issue 32 finding 11: a far neighbour of a narrow Gaussian underflowed to an explicit 0 in float32 P."""
    X = (1.2 ** np.arange(100.0))[:, None]
    P = knn_gaussian_affinities(X, 5)
    assert P.nnz and (P.data > 0).all()
    assert P.perplexity == 5 and P.k == 15


def test_knn_max_entries_lowers_k_and_the_perplexity_it_reports():
    """``perplexity`` as high as allowed makes the kNN P complete; ``max_entries`` lowers k to fit and the
    perplexity to k / 3, and P says so; it is the P of that perplexity and k."""
    X = np.random.default_rng(0).normal(size=(300, 8))
    full = knn_gaussian_affinities(X, 99.7)
    assert full.k == 299 and full.nnz == 300 * 299
    P = knn_gaussian_affinities(X, 99.7, max_entries=300 * 30 + 299)
    assert P.k == 30 and P.perplexity == 10.0 and P.nnz <= 2 * 300 * 30
    same = knn_gaussian_affinities(X, 10.0, k=30)
    assert abs(P - same).max() == 0
    assert knn_gaussian_affinities(X, 5.0, max_entries=300 * 30).perplexity == 5.0  # (k = 15 fits: unchanged)
    with pytest.raises(MemoryBudgetError, match="one neighbour"):
        knn_gaussian_affinities(X, 5.0, max_entries=299)


def _walk(n: int, d: int, seed: int = 0) -> str:
    """Code making X: n points of a d-dimensional random walk plus noise, in place (no temporaries above X)."""
    return f"""
        rng = np.random.default_rng({seed})
        X = rng.normal(size=({n}, {d}))
        np.cumsum(X, axis=0, out=X)
        for r in range(0, {n}, 1024):
            X[r : r + 1024] += rng.normal(scale=3.0, size=X[r : r + 1024].shape)
    """


def test_the_exact_neighbour_search_is_refused_before_it_outgrows_the_budget():
    """The exact search's memory is checked before it allocates: a budget one byte under what its float32 pass
    needs (``exact_bytes``) is a MemoryBudgetError naming the approximate search, from the kNN P too; at the need,
    the neighbours are found."""
    X = np.random.default_rng(0).normal(size=(600, 16))
    need = knn.exact_bytes(600, 16, 600, 30)
    try:
        budget.set_memory_budget(need - 1)
        with pytest.raises(MemoryBudgetError, match="neighbours='approx'"):
            knn.exact_neighbours(X, 30)
        with pytest.raises(MemoryBudgetError, match="exact 30-nearest-neighbour search of 600 points"):
            knn_gaussian_affinities(X, 10.0, neighbours="exact")
        budget.set_memory_budget(need)
        assert knn.exact_neighbours(X, 30)[0].shape == (600, 30)
        # points given in float32 are searched from a float64 copy, which the budget counts before it is made
        with pytest.raises(MemoryBudgetError, match="exact 30-nearest-neighbour search"):
            knn.exact_neighbours(X.astype(np.float32), 30)
        budget.set_memory_budget(need + X.size * 8)
        assert knn.exact_neighbours(X.astype(np.float32), 30)[0].shape == (600, 30)
    finally:
        budget.set_memory_budget(None)


@pytest.mark.parametrize("d", [64, 768])
def test_exact_bytes_covers_the_measured_peak(d):
    """``exact_bytes`` (what the budget is asked for) against the exact search's peak allocation measured in a
    fresh process (tracemalloc, which counts numpy's arrays; after the kernels were compiled and run on a few
    points), on random walks of 16384 points (at 768 dimensions float32 leaves a few rows to the float64 pass):
    not below the peak, nor twice it. (RSS is not asserted: BLAS's own buffers and the allocator's arenas come
    on top of it and differ between runs of the same code, 67 and 186 MB at 64 dimensions.)"""
    head = """
        import json, tracemalloc
        import numpy as np
        from headsne_widget.affinity import neighbours as knn
    """
    search = f"""
        knn.exact_neighbours(X[:1500], 60)  # compiled and run, the probe too
        tracemalloc.start()
        knn.exact_neighbours(X, 60)
        print(json.dumps(dict(used=tracemalloc.get_traced_memory()[1], bound=knn.exact_bytes(16384, {d}, 16384, 60))))
    """
    code = "".join(textwrap.dedent(part) for part in (head, _walk(16384, d), search))
    out = run_child(code)
    assert out["bound"] / 2 < out["used"] <= out["bound"], out


# ---------------------------------------------------------------------------------------- under a real limit

N_TOKENS = 8192
LIMIT = 2 * 2**30  # the broad head's uncapped rows and P would need 33.2 M entries x 72 B = 2.2 GiB alone


@pytest.fixture(scope="module")
def broad_llama(bert_tokenizer, tmp_path_factory) -> str:
    """A tiny random causal Llama (2 layers, hidden 64, 8 query heads on 2 key/value heads) whose layer 1 head 2
    has zero queries: its rows are uniform over every earlier token, the broadest causal head."""
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=bert_tokenizer.vocab_size, hidden_size=64, num_attention_heads=8, num_key_value_heads=2,
        intermediate_size=64, num_hidden_layers=2, max_position_embeddings=N_TOKENS, initializer_range=0.2,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaModel(config)
    d = config.hidden_size // config.num_attention_heads
    with torch.no_grad():
        model.layers[1].self_attn.q_proj.weight[2 * d : 3 * d] = 0.0
    directory = tmp_path_factory.mktemp("broad-llama")
    model.save_pretrained(directory)
    bert_tokenizer.save_pretrained(directory)
    return os.fspath(directory)


def test_a_broad_head_under_an_address_space_limit_is_refused_or_capped_not_killed(broad_llama):
    """Issue 32: the function API on a broad head at a length whose rows would not fit. A child under RLIMIT_AS
    (2 GiB) captures 8192 tokens, asks for layer 1 head 2 at mass 0.99 within the budget's entries and gets
    MemoryBudgetError within seconds (before the rows are computed), then with ``max_keys`` (what the error says
    fits) a capped result whose rows and ``kept`` are the oracle's; P is built from it. Exit code 0."""
    code = f"""
        import json, time, warnings
        import numpy as np
        from headsne_widget import budget, extract
        from headsne_widget.affinity.sparse import sparse_attention_affinities
        from headsne_widget.errors import MemoryBudgetError
        from headsne_widget.texts import TSNE_ABSTRACT

        words = TSNE_ABSTRACT.split()
        text = " ".join(words[i % len(words)] for i in range({N_TOKENS}))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ex = extract(text, {broad_llama!r}, device="cpu", max_tokens={N_TOKENS}, progress=False)
        limit = budget.entries_within()
        start = time.perf_counter()
        try:
            ex.sparse_attention(1, 2, mass=0.99, max_entries=limit)
            refused = None
        except MemoryBudgetError as error:
            refused = dict(message=str(error), needed=error.needed_entries, bytes=error.needed_bytes)
        refused_s = time.perf_counter() - start
        keys = limit // {N_TOKENS}
        S = ex.sparse_attention(1, 2, mass=0.99, max_keys=keys, max_entries=limit)
        P, share = sparse_attention_affinities(S)
        counts = np.diff(S.indptr)
        lowest = all((S.indices[S.indptr[i] : S.indptr[i + 1]] == np.arange(c)).all() for i, c in enumerate(counts))
        print(json.dumps(dict(
            refused=refused, refused_s=refused_s, limit=limit, keys=keys, nnz=int(S.nnz), counts=counts.tolist(),
            kept=S.kept.tolist(), lowest=bool(lowest), P_nnz=int(P.nnz), share=share,
        )))
    """
    out = run_child(code, limit=LIMIT, timeout=240)
    rows_need = sum(int(np.ceil(0.99 * (i + 1) * (1 - 1e-12))) for i in range(N_TOKENS))  # 33.2 M
    assert rows_need * budget.SPARSE_ENTRY_BYTES > LIMIT  # (the head would not fit the limit uncapped)
    refused = out["refused"]
    assert refused is not None and out["refused_s"] < 15
    assert (
        out["limit"] < refused["needed"] < rows_need
        and refused["bytes"] == refused["needed"] * budget.SPARSE_ENTRY_BYTES
    )
    assert "layer 1 head 2" in refused["message"] and f"max_keys={out['keys']} fits" in refused["message"]
    keys = out["keys"]
    assert 100 < keys < 2000
    i = np.arange(N_TOKENS)
    counts = np.minimum(np.ceil(0.99 * (i + 1) * (1 - 1e-12)).astype(int), keys)  # uniform rows: no rounding in it
    np.testing.assert_array_equal(out["counts"], counts)
    assert out["lowest"]  # every row keeps its lowest columns: the ties go to the lower column
    np.testing.assert_allclose(out["kept"], counts / (i + 1), rtol=1e-6)
    assert out["nnz"] == counts.sum() <= out["limit"] and 0 < out["P_nnz"] <= 2 * out["nnz"]


def test_a_p_array_that_cannot_be_had_is_a_memory_error_as_numpys():
    """The big P arrays come from ``_memory.fresh_empty`` (its own mmap, not np.empty): under RLIMIT_AS an array
    beyond the limit raises MemoryError, as np.empty of the same size does, and one within it is writable."""
    code = """
        import json
        import numpy as np
        from headsne_widget._memory import fresh_empty

        kinds = []
        for make in (np.empty, fresh_empty):
            try:
                make(2**31, np.float32)
                kinds.append("allocated")
            except Exception as error:
                kinds.append(type(error).__name__)
        a = fresh_empty(2**22, np.float32)
        a[:] = 2.0
        print(json.dumps(dict(kinds=kinds, total=float(a.sum()))))
    """
    out = run_child(code, limit=LIMIT)
    assert out["kinds"] == ["MemoryError", "MemoryError"]
    assert out["total"] == 2.0 * 2**22


def test_a_dense_p_beyond_the_budget_is_refused_before_it_is_built(abstract_ex):
    """A dense P asked for (sparse=False) past the memory budget: a MemoryBudgetError with what it would need, in
    a unit a reader can use (MiB for a small budget, never "0.00 GiB"), and what to do instead."""
    from headsne_widget import selection_affinities

    budget.set_memory_budget(2**16)
    try:
        with pytest.raises(MemoryBudgetError) as refused:
            selection_affinities(abstract_ex, "attention", 1, 2, sparse=False)
    finally:
        budget.set_memory_budget(None)
    message = str(refused.value)
    assert refused.value.needed_bytes > 2**16
    for part in (f"dense P of layer 1 head 2 for {abstract_ex.n_tokens} tokens", "over the 0.1 MiB memory budget",
                 "sparse=None", "max_tokens=", "set_memory_budget"):  # fmt: skip
        assert part in message, message
    P = selection_affinities(abstract_ex, "attention", 1, 2, sparse=False).P  # within the budget again
    assert isinstance(P, np.ndarray) and P.shape == (abstract_ex.n_tokens, abstract_ex.n_tokens)
