"""Fixtures of the browser tests: one real Jupyter server and one headless Debian chromium per session.

The helpers themselves live in ``tests/ui/jupyter.py`` (shared with ``benchmarks/widget_speed.py``).
Without /usr/bin/chromium the tests are skipped locally, but fail in CI (``CI=true``), where the
browser is part of the setup.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import jupyter

ARTIFACTS = jupyter.REPO_ROOT / "test-artifacts"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def require_chromium() -> None:
    """Skip (or, in CI, fail) when Debian's chromium is not installed."""
    if Path(jupyter.CHROMIUM).is_file():
        return
    message = f"{jupyter.CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)"
    if in_ci():
        pytest.fail(f"CI=true and {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Debian chromium driven by Playwright's sync API."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = jupyter.launch_browser(playwright)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def jupyter_server(browser: Any) -> Iterator[jupyter.JupyterServer]:
    """A real ``jupyter lab`` on 127.0.0.1 (it serves Notebook 7 too), torn down with its kernels.

    It asks for ``browser`` first, so that a missing chromium skips before a server is started.
    """
    server = jupyter.start_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def module_server(browser: Any) -> Iterator[jupyter.JupyterServer]:
    """A server of the module's own: no tab of another module's notebook is restored next to its own."""
    server = jupyter.start_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """test-artifacts/ in the repository root (git-ignored): screenshots for people to look at."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
