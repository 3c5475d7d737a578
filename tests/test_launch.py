"""The README's demo command, ``headsne-demo``, serves demo.ipynb from a fresh clone, as the current user.

The end-to-end test clones this repository's HEAD into a temporary folder and runs the clone's launcher
(``python -m headsne_widget.cli.launch`` in the clone, which is what the ``headsne-demo`` console script
calls) with this test's Python. It reuses the installed .venv instead of running ``.ci/setup`` in the
clone, which would take about 7 minutes of reinstalling torch, the package, the model and the npm bundle:
the clone's own ``headsne_widget`` is imported (the clone is the working directory), finds the clone's
``demo.ipynb`` by itself, and JupyterLab and its dependencies come from the .venv. The launcher is
started with ``--no-browser`` on a free port of 127.0.0.1; the test reads the URL it prints, fetches
demo.ipynb through the server with that token, starts a kernel, then stops the launcher with SIGINT
(Ctrl-C) and checks that the server and the kernel are gone.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from headsne_widget.cli import launch

REPO = Path(__file__).resolve().parents[1]
URL = re.compile(r"(https?://[^\s/]+)/lab/tree/demo\.ipynb\?token=([0-9a-f]+)")
START_TIMEOUT = 90.0  # launcher start to the URL printed (about 3 s on an idle 2-core machine)
STOP_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (Linux /proc)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        for c in map(int, children):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie that nobody reaped counts as alive: an orphan)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "X"


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")


def log_lines(path: Path, n: int = 12) -> list[str]:
    """The log's last ``n`` lines, each cut to 300 characters (some log lines are whole minified scripts)."""
    return [line[:300] for line in path.read_text(errors="replace").splitlines()[-n:]]


def get(url: str, token: str) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        return resp.status, resp.read()


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs git and a git checkout of the repository")
    dest = tmp_path / "headsne-widget"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(dest)], check=True, timeout=120)
    if not (dest / "headsne_widget" / "cli" / "launch.py").is_file():
        pytest.fail("the clone of HEAD has no headsne_widget/cli/launch.py: commit it first")
    return dest


def isolated_env(home: Path) -> dict[str, str]:
    """Jupyter's config, data and runtime folders under ``home``: nothing of the user's leaks in or out."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JUPYTER_TOKEN")}
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        (home / name).mkdir(parents=True)
        env[name] = str(home / name)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1", NO_PROXY="*", no_proxy="*")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def test_readme_demo_command_serves_demo_from_a_fresh_clone(clone: Path, tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    assert "bash .ci/setup && .venv/bin/headsne-demo" in readme, "the README's demo command is not headsne-demo"
    port = free_port()
    log_path = tmp_path / "server.log"
    start = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "headsne_widget.cli.launch",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={port}",
                "--ServerApp.port_retries=0",
            ],
            cwd=clone,
            env=isolated_env(tmp_path / "jupyter"),
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,
        )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    printed: list[str] = []
    found = None
    family: set[int] = set()
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while found is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            printed.append(line)
            found = URL.search(line)
        url_seconds = time.perf_counter() - start
        assert found, (
            f"no URL printed within {START_TIMEOUT:.0f} s (exit {proc.poll()}); stdout {printed!r}; "
            f"server log ends {log_lines(log_path)}"
        )
        assert f"starting JupyterLab on {clone / 'demo.ipynb'}" in "".join(printed), printed  # the clone's demo
        base, token = found.group(1), found.group(2)
        assert base in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"), base

        # the server is the launcher's child; as root it needs --allow-root, otherwise it must not get it
        servers = [p for p in descendants(proc.pid) if "jupyterlab" in " ".join(cmdline(p))]
        assert len(servers) == 1, [cmdline(p) for p in descendants(proc.pid)]
        assert ("--allow-root" in cmdline(servers[0])) == (os.geteuid() == 0), cmdline(servers[0])

        # the printed URL opens JupyterLab, and the server hands out the clone's demo.ipynb
        status, page = get(found.group(0), token)
        assert status == 200 and b"JupyterLab" in page
        status, body = get(f"{base}/api/contents/demo.ipynb?content=1", token)
        model = json.loads(body)
        served = [c["source"] for c in model["content"]["cells"]]
        on_disk = ["".join(c["source"]) for c in json.loads((clone / "demo.ipynb").read_text())["cells"]]
        assert status == 200 and model["type"] == "notebook" and served == on_disk
        assert any("HeadSNE(TSNE_ABSTRACT)" in s for s in served)

        # a kernel for the notebook, as opening it in the browser starts one: it must not outlive the server
        req = urllib.request.Request(
            f"{base}/api/sessions",
            method="POST",
            data=json.dumps({"path": "demo.ipynb", "type": "notebook", "kernel": {"name": "python3"}}).encode(),
            headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=60) as resp:
            assert resp.status == 201
        deadline = time.monotonic() + 30
        while len(descendants(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        family = descendants(proc.pid)
        assert len(family) >= 2, f"no kernel process under the server: {[cmdline(p) for p in family]}"
        print(f"URL printed {url_seconds:.1f} s after the launch; processes {sorted(family)}")

        # Ctrl-C: the launcher stops the server, which stops its kernel; nothing is left behind
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=STOP_TIMEOUT)
        assert code == 0, f"launcher exit code {code}; server log ends {log_lines(log_path)}"
        deadline = time.monotonic() + 10
        while any(alive(p) for p in family) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [cmdline(p) for p in family if alive(p)]
        assert not left, f"processes outlived the launcher: {left}"
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still answers after the stop"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        for p in family:
            if alive(p):
                os.kill(p, signal.SIGKILL)


def test_allow_root_only_for_root(tmp_path: Path) -> None:
    nb = tmp_path / "demo.ipynb"
    as_root = launch.lab_command(nb, ["--no-browser"], root=True)
    as_user = launch.lab_command(nb, ["--no-browser"], root=False)
    assert as_root[-1] == "--allow-root" and "--allow-root" not in as_user
    assert as_user == [sys.executable, "-m", "jupyterlab", str(nb), "--no-browser"]
    assert launch.lab_command(nb, ["--allow-root"], root=True).count("--allow-root") == 1


def test_notebook_argument_and_missing_notebook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nb = tmp_path / "mine.ipynb"
    nb.write_text("{}")
    assert launch.find_notebook(["--port=1", str(nb), "--no-browser"]) == (nb.resolve(), ["--port=1", "--no-browser"])
    assert launch.find_notebook([]) == (REPO / "demo.ipynb", [])
    assert launch.main([str(tmp_path / "absent.ipynb")]) == 2
    assert "absent.ipynb does not exist" in capsys.readouterr().err


# ------------------------------------------------------------------------------- .ci/setup's apt step

HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[2], os.O_RDWR | os.O_CREAT, 0o640)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # apt and dpkg lock with fcntl, like this
print("held", flush=True)
time.sleep(float(sys.argv[1]))
"""


@pytest.mark.skipif(
    shutil.which("apt-get") is None or not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="needs apt-get and root (as CI runs .ci/setup)",
)
def test_setup_apt_step_waits_for_apt_locks() -> None:
    """While another process holds apt's lists lock and dpkg's frontend lock, .ci/setup's chromium step
    waits for them instead of failing at once with exit 100 (chromium is then installed, or found up to
    date). The step is the ``# apt: begin`` .. ``# apt: end`` block of .ci/setup, run on its own."""
    setup = (REPO / ".ci" / "setup").read_text()
    block = re.search(r"^# apt: begin.*?^# apt: end", setup, re.MULTILINE | re.DOTALL)
    assert block, ".ci/setup lost its '# apt: begin' .. '# apt: end' block"
    # `apt-get update` meets the lists lock (held 6 s), `apt-get install` then meets dpkg's lock (held 30 s)
    holds = {"/var/lib/apt/lists/lock": 6.0, "/var/lib/dpkg/lock-frontend": 30.0}
    holders = [
        subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(s), path], stdout=subprocess.PIPE, text=True)
        for path, s in holds.items()
    ]
    try:
        for holder in holders:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        run = subprocess.run(
            ["bash", "-c", f"set -euo pipefail\n{block.group(0)}\ninstall_chromium"],
            env={**os.environ, "APT_LOCK_WAIT": "120", "DEBIAN_FRONTEND": "noninteractive"},
            capture_output=True,
            text=True,
            timeout=600,
        )
        waited = time.monotonic() - start
    finally:
        for holder in holders:
            holder.kill()
            holder.wait(timeout=10)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
    assert waited >= max(holds.values()) - 1.5, f"finished after {waited:.1f} s, before dpkg's lock was free"
    assert "Could not get lock" in run.stderr and "waiting for another apt process" in run.stderr, run.stderr
    assert re.search(r"chromium is already the newest version|Setting up chromium", run.stdout), run.stdout[-2000:]
