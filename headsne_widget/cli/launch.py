"""``headsne-demo``: open the demo notebook in JupyterLab, for any user (root included).

``bash .ci/setup && .venv/bin/headsne-demo`` is the README's demo command. It runs ``jupyter lab`` on
``demo.ipynb`` (found next to the package in the repository, as ``.ci/setup`` installs it editable, or
given as a path argument), adds ``--allow-root`` only when it runs as root (containers, cloud notebooks
and CI images, where a bare ``jupyter lab`` exits at once with "Running as root is not recommended"), and
once the server answers prints the URL to open, token included, so that a machine without a browser
(``--no-browser``, ssh, a container) still tells the user where to go. Every other argument goes to
``jupyter lab`` unchanged (``--no-browser``, ``--port=8890``, ``--ip=0.0.0.0``, ...).

Ctrl-C (SIGINT) or SIGTERM stops the server and its kernels, and the launcher exits with the server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

DEMO_NAME = "demo.ipynb"
# Two folders up from here is the repository when the package is installed editable (.ci/setup).
REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 120.0  # seconds for the server to write its info file and answer /api/status
STOP_TIMEOUT = 20.0  # seconds for a clean shutdown (kernels included) before the server is killed


def find_notebook(argv: Sequence[str]) -> tuple[Path, list[str]]:
    """The notebook to open and the arguments left for ``jupyter lab``.

    The first argument that ends in ``.ipynb`` and does not start with ``-`` names the notebook;
    without one it is ``demo.ipynb`` of the repository this package is installed from.
    """
    rest = list(argv)
    for i, arg in enumerate(rest):
        if not arg.startswith("-") and arg.endswith(".ipynb"):
            path = Path(arg).expanduser().resolve()
            del rest[i]
            break
    else:
        path = REPO_ROOT / DEMO_NAME
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist: run headsne-demo from a clone of headsne-widget installed with "
            f"`bash .ci/setup` (an editable install), or pass the notebook's path: headsne-demo path/to/{DEMO_NAME}"
        )
    return path, rest


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def lab_command(notebook: Path, extra: Sequence[str], *, root: bool | None = None) -> list[str]:
    """The ``jupyter lab`` command line: this Python's JupyterLab on ``notebook``, plus ``extra``.

    ``--allow-root`` is added when running as root (``root=None`` asks the OS) unless already given.
    The notebook's folder becomes the server's root (jupyter_server's rule for a file argument).
    """
    if root is None:
        root = running_as_root()
    cmd = [sys.executable, "-m", "jupyterlab", str(notebook), *extra]
    if root and not any(a == "--allow-root" or a.startswith("--allow-root=") or "allow_root" in a for a in extra):
        cmd.append("--allow-root")
    return cmd


def server_info(pid: int) -> dict | None:
    """The info file ``jpserver-<pid>.json`` the server writes once it listens (url, port, token), or None."""
    from jupyter_core.paths import jupyter_runtime_dir

    path = Path(jupyter_runtime_dir()) / f"jpserver-{pid}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def notebook_url(info: dict, notebook: Path) -> str:
    """The address that opens ``notebook`` in JupyterLab on the server described by ``info``."""
    base = info["url"].rstrip("/") + "/"
    try:
        rel = notebook.relative_to(Path(info["root_dir"]).resolve()).as_posix()
    except ValueError:
        rel = notebook.name
    url = urllib.parse.urljoin(base, "lab/tree/" + urllib.parse.quote(rel))
    token = info.get("token") or ""
    return f"{url}?token={urllib.parse.quote(token)}" if token else url


def answers(info: dict, timeout: float = 5.0) -> bool:
    """Whether the server's REST API answers ``/api/status`` with the token."""
    base = info["url"].rstrip("/") + "/"
    req = urllib.request.Request(urllib.parse.urljoin(base, "api/status"))
    if info.get("token"):
        req.add_header("Authorization", f"token {info['token']}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_until_up(proc: subprocess.Popen, timeout: float = STARTUP_TIMEOUT) -> dict | None:
    """Poll until the server has written its info file and answers; None if it exited or took too long."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        info = server_info(proc.pid)
        if info is not None and answers(info):
            return info
        time.sleep(0.2)
    return None


def stop(proc: subprocess.Popen, timeout: float = STOP_TIMEOUT) -> int:
    """Ask the server to shut down (SIGTERM: it stops its kernels), kill it if it does not, reap it."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
    return proc.returncode


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        print("\nusage: headsne-demo [NOTEBOOK.ipynb] [jupyter lab options, e.g. --no-browser --port=8890]")
        return 0
    try:
        notebook, extra = find_notebook(args)
    except FileNotFoundError as err:
        print(f"headsne-demo: {err}", file=sys.stderr)
        return 2
    cmd = lab_command(notebook, extra)
    print(f"headsne-demo: starting JupyterLab on {notebook}", flush=True)
    proc = subprocess.Popen(cmd, cwd=notebook.parent)

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        info = wait_until_up(proc)
        if info is not None:
            print(
                f"\nheadsne-demo: JupyterLab is serving {notebook.name}. Open this URL in a browser:\n\n"
                f"    {notebook_url(info, notebook)}\n\n(Ctrl-C stops the server.)\n",
                flush=True,
            )
        elif proc.poll() is None:
            print(
                f"headsne-demo: the server did not answer within {STARTUP_TIMEOUT:.0f} s; "
                "its own log above gives the URL",
                file=sys.stderr,
                flush=True,
            )
        return proc.wait()
    except KeyboardInterrupt:
        print("\nheadsne-demo: stopping JupyterLab", file=sys.stderr, flush=True)
        code = stop(proc)
        return 0 if code in (0, -signal.SIGTERM, -signal.SIGINT) else code
    finally:
        stop(proc)
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
