"""Where a corpus study's tasks run (:func:`.corpus.corpus_study`): in this process, on a local Dask cluster of
threads or processes started for the call, or on a running ``distributed.Client``; the rows come back as the
tasks finish, and Ctrl-C keeps those finished so far (the module doc of :mod:`.corpus` has the measurements
behind the default).
"""

from __future__ import annotations

import contextlib
import os
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "DEFAULT_LOCAL",
    "LOCAL_CLIENTS",
    "check_client",
    "progress_bar",
    "run_tasks",
    "session",
]

#: what ``client`` may name besides a ``distributed.Client``
LOCAL_CLIENTS = ("sync", "threads", "processes")
#: the kind of local cluster that ``client=None`` starts (measured, see the module doc of :mod:`.corpus`)
DEFAULT_LOCAL = "threads"
#: one text's task: (index, token ids, model, **settings) -> its rows (:func:`.corpus.text_rows`)
Task = Callable[..., list[dict]]


def _distributed() -> Any:
    """The ``distributed`` module, or an error naming the extra that installs it."""
    try:
        import distributed
    except ImportError as err:
        raise ImportError(
            "corpus_study runs on Dask, which is not installed: pip install 'headsne-widget[dask]' (or pass "
            "client='sync' to run in this process without it)"
        ) from err
    return distributed


def check_client(client: Any) -> Any:
    """A ``distributed.Client`` that is running, else a clear error."""
    if not isinstance(client, _distributed().Client):
        raise TypeError(
            f"client must be None, one of {', '.join(map(repr, LOCAL_CLIENTS))} or a dask.distributed.Client, "
            f"got {type(client).__name__}"
        )
    if client.status != "running":
        raise RuntimeError(
            f"the Dask client is {client.status}: connect a new one (distributed.Client(...)) or pass client=None"
        )
    return client


def _local_cluster(kind: str) -> Any:
    LocalCluster = _distributed().LocalCluster
    cores = os.cpu_count() or 1
    if kind == "threads":
        return LocalCluster(n_workers=1, threads_per_worker=cores, processes=False, dashboard_address=":0")
    return LocalCluster(n_workers=cores, threads_per_worker=1, processes=True, dashboard_address=":0")


@contextlib.contextmanager
def session(client: Any) -> Iterator[Any]:
    """The client to run on (None: in-process), closing any local cluster started here afterwards."""
    if client is None:
        try:
            client = _distributed().default_client()
        except ValueError:  # no client made in this session
            client = DEFAULT_LOCAL
        else:
            yield check_client(client)
            return
    if isinstance(client, str):
        if client not in LOCAL_CLIENTS:
            raise ValueError(f"client must be one of {', '.join(map(repr, LOCAL_CLIENTS))}, got {client!r}")
        if client == "sync":
            yield None
            return
        with _local_cluster(client) as cluster, _distributed().Client(cluster, set_as_default=False) as local:
            yield local
        return
    yield check_client(client)


def _model_for_workers(model: Any, client: Any) -> Any:
    """What the tasks get as ``model``: a path or hub id as that string, an object once per worker."""
    if model is None or isinstance(model, str):
        return model
    if isinstance(model, os.PathLike):
        return os.fspath(model)
    if client is None:
        return model
    try:  # a cluster of threads in this process takes the object as it is; workers in other processes pickle it
        return client.scatter(model, broadcast=True, hash=False)
    except Exception as err:
        raise TypeError(
            f"the model object ({type(model).__name__}) cannot be pickled to send to the Dask workers ({err}): pass "
            "the model's directory or hub id as a string (each worker then loads it once), or client='sync' or "
            "client='threads' to run in this process with the object as it is"
        ) from err


def progress_bar(total: int, done: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc="texts", unit="text", disable=not enabled)


def _results_here(task: Task, jobs: dict[int, Any], model: Any, settings: dict) -> Iterator[list[dict]]:
    """Each text's rows, computed in this process, in corpus order."""
    for index, ids in jobs.items():
        yield task(index, ids, model, **settings)


def _results_dask(
    task: Task, client: Any, jobs: dict[int, Any], model: Any, settings: dict, retries: int
) -> Iterator[list[dict]]:
    """Each text's rows as its task finishes on ``client``; what is left is cancelled when the caller stops."""
    from distributed import as_completed

    prefix = f"corpus_study-{uuid.uuid4().hex[:8]}"
    futures = [
        client.submit(task, index, ids, model, key=f"{prefix}-{index}", retries=retries, **settings)
        for index, ids in jobs.items()
    ]
    try:
        for future in as_completed(futures, loop=client.loop):
            yield future.result()
    finally:
        client.cancel([f for f in futures if not f.done()])


def _collect(results: Iterator[list[dict]], total: int, bar: Any, on_text: Callable | None) -> list[dict]:
    """The rows of every text as they arrive; on Ctrl-C a warning and the rows finished so far."""
    rows: list[dict] = []
    done = 0
    with contextlib.closing(results):  # type: ignore[type-var]
        try:
            for result in results:
                rows += result
                done += 1
                bar.update()
                if on_text is not None:
                    on_text(result)
        except KeyboardInterrupt:
            warnings.warn(
                f"interrupted: returning the rows of the {done} texts finished so far (of {total})",
                RuntimeWarning,
                stacklevel=4,
            )
    return rows


def run_tasks(
    task: Task,
    jobs: dict[int, Any],
    settings: dict,
    model: Any,
    *,
    client: Any,
    retries: int,
    bar: Any,
    on_text: Callable | None,
) -> list[dict]:
    """The rows of every text in ``jobs`` (index -> token ids), each computed by ``task(index, ids, model,
    **settings)``: in this process in corpus order when ``client`` is None, else as the tasks finish on it
    (a model object sent once to each worker, a task that raised run ``retries`` more times). ``bar`` counts
    the texts; ``on_text`` gets each text's rows as they arrive; on Ctrl-C a warning and the rows so far."""
    shipped = _model_for_workers(model, client)
    if client is None:
        results = _results_here(task, jobs, shipped, settings)
    else:
        results = _results_dask(task, client, jobs, shipped, settings, retries)
    return _collect(results, len(jobs), bar, on_text)
