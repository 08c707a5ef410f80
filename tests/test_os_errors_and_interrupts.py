"""One place for what the operating system refuses and for Ctrl-C: every command, one line, a documented exit code.

A name too long, a loop of symbolic links, a full disk, arguments that are not UTF-8, and Ctrl-C while the commands'
modules still load were internal errors (exit 70), or a traceback and exit -2, before the fix. The full disk is a
real one: a 64 KiB tmpfs (the suite runs as root); the interrupt lands at a known point (an import hook that
waits for the signal), not after a sleep.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT
from factories import synthetic_run, write_synthetic
from hostile import one_error, snapshot

from reportgen.cli import main

RUN_A = "20261130T000000Z-cpu-test-abc123"
LONG = "n" * 300


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    write_synthetic(store, synthetic_run(run_id=RUN_A))
    return store


LONG_NAME_CASES = {
    "runs --store": lambda t, s: (["runs", "--store", str(t / LONG)], {}, t / LONG),
    "build --out": lambda t, s: (["build", "--runs", str(s), "--out", str(t / LONG)], {}, t / LONG),
    "compare run name": lambda t, s: (["compare", LONG, RUN_A, "--store", str(s)], {}, Path(LONG)),
    "rm run name": lambda t, s: (["rm", LONG, "--reason", "x", "--store", str(s)], {}, Path(LONG)),
    "init --dir": lambda t, s: (["init", "--dir", str(t / LONG)], {}, t / LONG),
    "profile --scenario": lambda t, s: (["profile", "--device", "cpu", "--quiet", "--scenario", str(t / LONG) + ".py",
                                         "--store", str(s)], {}, t / (LONG + ".py")),
    "REPORTGEN_STORE": lambda t, s: (["runs"], {"REPORTGEN_STORE": str(t / LONG)}, t / LONG),
}


@pytest.mark.parametrize("case", list(LONG_NAME_CASES))
def test_a_name_too_long_is_one_line_naming_the_path(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path)
    argv, env, path = LONG_NAME_CASES[case](tmp_path, store)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    assert main(argv) == 3
    message = one_error(capsys)
    shown = str(path)[:199] + "\u2026"
    assert message.startswith(shown + ": File name too long; use a shorter path"), message
    assert snapshot(tmp_path) == before


def test_a_symlink_loop_as_the_site_or_the_store_is_one_line(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    before = snapshot(tmp_path)
    assert main(["build", "--runs", str(store), "--out", str(loop)]) == 3
    assert one_error(capsys) == f"{loop}: Too many levels of symbolic links; fix the link or choose another path"
    assert main(["runs", "--store", str(loop)]) == 3  # not an empty store (exit 0)
    assert one_error(capsys) == f"{loop}: Too many levels of symbolic links; fix the link or choose another path"
    assert snapshot(tmp_path) == before


def test_a_store_that_is_a_link_to_nothing_is_not_an_empty_store(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    dangling = tmp_path / "results"
    dangling.symlink_to(tmp_path / "gone")
    assert main(["runs", "--store", str(dangling)]) == 3
    assert one_error(capsys) == f"{dangling}: is a symbolic link to nothing; fix the link or pass --store a folder"


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real file system with no space left: a 64 KiB tmpfs, filled."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("needs root to mount a tmpfs")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def _fill(folder: Path) -> None:
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def test_a_full_disk_in_rm_build_and_init_is_one_line_naming_the_folder(
        full_disk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path)
    small = full_disk / "store"
    small.mkdir()
    (small / RUN_A).mkdir()
    (small / RUN_A / "run.json").write_bytes((store / RUN_A / "run.json").read_bytes())
    (full_disk / "repo").mkdir()
    _fill(full_disk)
    before = snapshot(full_disk)
    reason = ": No space left on device; cannot write: free some space or choose another folder"
    assert main(["rm", RUN_A, "--reason", "bad", "--store", str(small)]) == 3
    assert one_error(capsys) == f"{small}{reason}"
    assert main(["build", "--runs", str(store), "--out", str(full_disk / "site")]) == 3
    assert one_error(capsys) == f"{full_disk / 'site'}{reason}"
    assert main(["init", "--dir", str(full_disk / "repo")]) == 3
    assert one_error(capsys).startswith(f"{full_disk / 'repo'}")
    # init's own files: its own test; the site's and the store's lock files (empty, kept on purpose: removing a lock
    # file another process may be waiting on would let two writers in)
    kept = (str(full_disk / "repo"), str(full_disk / ".site.lock"), str(small / ".withdrawn.lock"))
    assert {k: v for k, v in snapshot(full_disk).items() if not k.startswith(kept)} == \
        {k: v for k, v in before.items() if not k.startswith(kept)}


def test_arguments_that_are_not_utf8_are_refused_in_one_line(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 reach Python as lone surrogates; printed or written they would raise."""
    store = os.fsencode(tmp_path) + b"/caf\xe9"
    proc = subprocess.run([sys.executable, "-m", "reportgen", "runs", "--store", store], capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2
    assert proc.stderr.decode() == (f"reportgen: error: argument 3 '{tmp_path}/caf\\xe9': not valid UTF-8; "
                                    "reportgen takes UTF-8 arguments (rename the file or folder)\n")


HOOK = """
import importlib.abc, os, signal, sys
class _WaitForCtrlC(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["RG_TEST_INTERRUPT_AT"]:
            sys.meta_path.remove(self)
            with open(os.environ["RG_TEST_MARKER"], "w") as fifo:  # tell the test: waiting
                fifo.write("x")
            signal.pause()  # Ctrl-C arrives here, inside this import
        return None
sys.meta_path.insert(0, _WaitForCtrlC())
"""


@pytest.mark.parametrize("module", ["reportgen.commands", "reportgen.site.build"])
def test_ctrl_c_in_build_is_one_line_and_exit_130_wherever_it_lands(module: str, tmp_path: Path) -> None:
    """``reportgen.commands`` loads before any command runs (the window where Ctrl-C gave a traceback and -2);
    ``reportgen.site.build`` loads inside the build command."""
    store = _store(tmp_path)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    marker = tmp_path / "waiting"
    os.mkfifo(marker)
    site = tmp_path / "site"
    env = {**os.environ, "PYTHONPATH": f"{hook}{os.pathsep}{ROOT}", "RG_TEST_INTERRUPT_AT": module,
           "RG_TEST_MARKER": str(marker)}
    env.pop("REPORTGEN_DEBUG", None)
    waiting = os.open(marker, os.O_RDONLY | os.O_NONBLOCK)  # no writer yet: select waits for the child's byte
    proc = subprocess.Popen([sys.executable, "-m", "reportgen", "build", "--runs", str(store), "--out", str(site)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        ready, _, _ = select.select([waiting], [], [], 120)
        assert ready and os.read(waiting, 1) == b"x", "the child never reached the import"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        os.close(waiting)
        proc.kill()
    assert proc.returncode == 130
    assert err == "reportgen: interrupted; stored runs and the site are unchanged\n"
    assert not site.exists()



def test_output_pipe_closed_by_the_reader_is_one_line_not_an_internal_error(tmp_path: Path) -> None:
    """`reportgen runs | head -0`: the reader has gone before the first line is written (the pipe's read end is
    closed before reportgen starts). One line naming standard output, exit 3, never exit 70; the store unchanged."""
    store = _store(tmp_path)
    before = snapshot(store)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "reportgen", "runs", "--store", str(store)], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("reportgen: error: standard output: Broken pipe; the program reading reportgen's "
                                  "output (e.g. `| head`) stopped reading")
    assert snapshot(store) == before
