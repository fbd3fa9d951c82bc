"""Hostile paths (issue 11 items 4 and 11): inputs that are FIFOs, directories, device nodes, sockets or
unreadable are typed errors at once; outputs are written atomically, never over something that is not a
regular file, and a failed write (ENOSPC, EACCES, EROFS) leaves no partial file; ``compile -o`` replaces
only the files its package lists; a package whose manifest was edited is refused.

Real failures are used where this machine allows them: a 64 KiB tmpfs for ENOSPC and a read-only tmpfs
for EROFS (``mount -t tmpfs``, root only), a child process running as ``nobody`` for EACCES (root ignores
file modes); a mocked ENOSPC only when no tmpfs can be mounted.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from pipeplan.errors import GGUFError
from pipeplan.files.atomic import OutputPathError, check_output_file, write_file_atomic
from pipeplan.files.paths import InputPathError, check_input_file
from pipeplan.tools.cli import main

from tests.conftest import REPO, STORIES

POOL = ('[[nodes]]\nid = "n0"\nmemory_bytes = 1073741824\nbandwidth_bytes_per_s = 1.0e11\nflops_per_s = 1.0e12\n'
        'link_bandwidth_bytes_per_s = 1.0e9\n')


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    old = os.environ.get("PIPEPLAN_CACHE")
    os.environ["PIPEPLAN_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("PIPEPLAN_CACHE", None)
    else:
        os.environ["PIPEPLAN_CACHE"] = old


# --------------------------------------------------------------------------- hostile files, made here
def _fifo(d: Path) -> Path:
    p = d / "fifo"
    os.mkfifo(p)
    return p


def _device(d: Path) -> Path:
    """A character device node like /dev/null (1, 3), made in ``d`` (so nothing of the system is at risk)."""
    p = d / "null-device"
    try:
        os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs CAP_MKNOD")
    return p


def _socket(d: Path) -> Path:
    p = d / "sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    s.close()
    return p


def _directory(d: Path) -> Path:
    p = d / "adir"
    p.mkdir()
    return p


HOSTILE = {"fifo": _fifo, "device": _device, "socket": _socket, "directory": _directory}


@pytest.fixture(params=sorted(HOSTILE))
def hostile(request):
    """(kind, path) of a FIFO, device node, socket or directory, made in a short-named temporary directory
    (AF_UNIX socket paths are limited to 108 bytes)."""
    d = Path(tempfile.mkdtemp(prefix="pp-h-", dir="/tmp"))
    try:
        yield request.param, HOSTILE[request.param](d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _cli(capsys, argv, timeout_s=20.0):
    t0 = time.monotonic()
    rc = main(argv)
    out, err = capsys.readouterr()
    assert time.monotonic() - t0 < timeout_s, "took too long: a blocking open()?"
    return rc, out, err


def _one_error(rc, out, err, code):
    assert rc == 2 and out == "" and err.startswith(f"error[{code}]: ") and err.count("\n") == 1, (rc, out, err)


# --------------------------------------------------------------------------- input paths
def test_check_input_file_refuses_every_non_file(hostile):
    """Item 4: a FIFO, a device node, a socket or a directory is refused by os.stat before any open()
    (an open() of a FIFO would block here), naming the path and what it is."""
    kind, p = hostile
    with pytest.raises(InputPathError) as ei:
        check_input_file(p, "model")
    assert ei.value.code == "bad_input_path" and str(p) in ei.value.message
    assert {"fifo": "FIFO", "device": "character device", "socket": "socket", "directory": "directory"}[kind] \
        in ei.value.message
    with pytest.raises(InputPathError) as ei:
        check_input_file(p / "x" if kind != "directory" else p / "none", "model")
    assert ei.value.code == "file_not_found"


@pytest.mark.parametrize("argv", [
    ["run", "{p}", "--prompt", "hi"],
    ["plan", "{p}"],
    ["replay", "{pkg}", "--model", "{p}", "--prompt", "hi"],
])
def test_model_path_not_a_file_is_one_error_line(capsys, hostile, argv, tmp_path):
    """Item 4: `pipeplan run|plan|replay` with a model path that is a FIFO, device, socket or directory exit 2
    with one error[bad_input_path] line naming the path, at once (no open() that blocks)."""
    _, p = hostile
    rc, out, err = _cli(capsys, [a.format(p=p, pkg=tmp_path) for a in argv])
    _one_error(rc, out, err, "bad_input_path")
    assert str(p) in err


@pytest.mark.parametrize("what", ["nodes", "facts", "plan", "timeline"])
def test_other_inputs_that_are_fifos(capsys, tmp_path, what):
    """Item 4: the pool TOML (--nodes), a facts TOML, the plan of `compile` and the timelines of `compare`
    are checked the same way: a FIFO is one typed error line at once."""
    f = _fifo(tmp_path)
    argv, code = {
        "nodes": (["run", str(STORIES), "--prompt", "hi", "--nodes", str(f), "--backend", "inproc"], "invalid_pool"),
        "facts": (["plan", "--model-facts", str(f)], "bad_model_facts"),
        "plan": (["compile", str(f), "-o", str(tmp_path / "pkg")], "bad_input_path"),
        "timeline": (["compare", str(f), str(f)], "bad_input_path"),
    }[what]
    rc, out, err = _cli(capsys, argv)
    _one_error(rc, out, err, code)
    assert "FIFO" in err and not (tmp_path / "pkg").exists()


def test_gguf_reader_refuses_a_fifo(tmp_path):
    """Item 4: read_model_facts (the frontend entry point) raises a GGUFError for a FIFO instead of blocking."""
    from pipeplan.frontend.gguf_facts import read_model_facts

    with pytest.raises(GGUFError) as ei:
        read_model_facts(_fifo(tmp_path))
    assert ei.value.code == "bad_input_path"


def _as_nobody(fn, *args) -> tuple[int, str]:
    """Run ``fn(*args) -> (exit status, text)`` in a forked child as uid/gid 65534 (root ignores file modes, so
    a real EACCES needs another user; forked, not exec'd, since the interpreter lives under /root)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        rc = 99
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            rc, text = fn(*args)
            os.write(w, text.encode())
        except BaseException as e:
            os.write(w, f"child failed: {e!r}".encode())
        finally:
            os._exit(rc)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        text = f.read().decode()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), text


def _read_facts_line(path: str) -> tuple[int, str]:
    from pipeplan.frontend.gguf_facts import read_model_facts

    try:
        read_model_facts(path)
    except GGUFError as e:
        return 2, e.one_line()
    return 0, ""


def _write_line(path: str) -> tuple[int, str]:
    try:
        write_file_atomic(path, "x" * 1000, "--trace")
    except OutputPathError as e:
        return 2, e.one_line()
    return 0, ""


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (to run a child as another user / mount)")


@needs_root
def test_unreadable_model_is_a_typed_error():
    """Item 4: a model file its reader may not open (mode 0600, read by uid 65534: a real EACCES) is the
    error[unreadable] line naming the path that the CLI prints."""
    d = Path(tempfile.mkdtemp(prefix="pp-noread-", dir="/tmp"))
    try:
        os.chmod(d, 0o755)
        f = d / "model.gguf"
        f.write_bytes(b"GGUF")
        os.chmod(f, 0o600)
        rc, line = _as_nobody(_read_facts_line, str(f))
        assert rc == 2 and line == f"error[unreadable]: GGUF file {f}: cannot open for reading: permission denied", line
    finally:
        shutil.rmtree(d)


# --------------------------------------------------------------------------- output files
def test_output_never_replaces_a_non_file(hostile):
    """Item 4: an output path that is a FIFO, device node, socket or directory is refused before any work
    and left exactly as it was (a device node such as /dev/null must never be replaced)."""
    kind, p = hostile
    before = os.lstat(p)
    for fn in (lambda: check_output_file(p, "--trace"), lambda: write_file_atomic(p, "{}", "--trace")):
        with pytest.raises(OutputPathError) as ei:
            fn()
        assert ei.value.code == "bad_output_path" and "not a regular file" in ei.value.message
    after = os.lstat(p)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert [x.name for x in p.parent.iterdir() if x.name.endswith(".tmp")] == []


def test_output_refuses_a_symlink(tmp_path):
    """A symbolic link is not replaced either (the file it points to stays as it is)."""
    target = tmp_path / "real.json"
    target.write_text("keep")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(OutputPathError, match="symbolic link"):
        write_file_atomic(link, "new", "--timeline")
    assert link.is_symlink() and target.read_text() == "keep"


def test_atomic_write_replaces_a_file_whole(tmp_path):
    """write_file_atomic puts the whole new content in place by rename (a new inode), keeps the old file's
    permission bits, and leaves no temporary file."""
    p = tmp_path / "out.json"
    p.write_text("old")
    os.chmod(p, 0o640)
    ino = p.stat().st_ino
    write_file_atomic(p, "new content", "--timeline")
    assert p.read_text() == "new content" and p.stat().st_ino != ino and stat.S_IMODE(p.stat().st_mode) == 0o640
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.json"]


@pytest.fixture
def small_tmpfs():
    """A 64 KiB tmpfs (None when this machine cannot mount one)."""
    d = Path(tempfile.mkdtemp(prefix="pp-tmpfs-", dir="/tmp"))
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)], capture_output=True)
    if r.returncode != 0:
        d.rmdir()
        yield None
        return
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)
        d.rmdir()


@pytest.fixture
def readonly_tmpfs():
    d = Path(tempfile.mkdtemp(prefix="pp-rofs-", dir="/tmp"))
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(d)], capture_output=True)
    if r.returncode != 0:
        d.rmdir()
        pytest.skip("cannot mount a read-only tmpfs here")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)
        d.rmdir()


def _fill(d: Path) -> None:
    with open(d / "filler", "wb") as f:
        try:
            f.write(b"x" * (1 << 20))
        except OSError as e:
            assert e.errno == errno.ENOSPC


def test_enospc_leaves_no_partial_file(small_tmpfs, tmp_path, monkeypatch):
    """Item 4: a write that runs out of space (a real ENOSPC on a full 64 KiB tmpfs; mocked only where no tmpfs
    can be mounted) is OutputPathError(write_failed) naming the option and path; the previous file is
    unchanged and no temporary file is left."""
    d = small_tmpfs if small_tmpfs is not None else tmp_path
    target = d / "trace.json"
    target.write_text("previous")
    if small_tmpfs is not None:
        _fill(d)
    else:
        def enospc(fd, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "write", enospc)
    with pytest.raises(OutputPathError) as ei:
        write_file_atomic(target, "y" * 200_000, "--trace")
    monkeypatch.undo()
    assert ei.value.code == "write_failed" and "--trace" in ei.value.message and "No space left" in ei.value.message
    assert target.read_text() == "previous"
    assert sorted(x.name for x in d.iterdir()) == sorted(["trace.json"] + (["filler"] if small_tmpfs else []))


def test_erofs_is_one_error_line(readonly_tmpfs, capsys):
    """Item 4, QA 6d: `pipeplan plan -o` onto a read-only file system is one error[write_failed] line (as
    the README and every other output), no file."""
    rc, out, err = _cli(capsys, ["plan", str(STORIES), "-o", str(readonly_tmpfs / "plan.mlir")])
    _one_error(rc, out, err, "write_failed")
    assert "Read-only file system" in err and list(readonly_tmpfs.iterdir()) == []


@needs_root
def test_eacces_leaves_no_partial_file():
    """Item 4: writing into a directory the writer may not write (root-owned 0755, written by uid 65534: a real
    EACCES) is error[write_failed] naming option and path, and nothing appears in the directory."""
    d = Path(tempfile.mkdtemp(prefix="pp-noacc-", dir="/tmp"))
    try:
        os.chmod(d, 0o755)
        rc, line = _as_nobody(_write_line, str(d / "t.json"))
        assert rc == 2 and line == f"error[write_failed]: --trace {d / 't.json'}: cannot write: Permission denied", line
        assert list(d.iterdir()) == []
    finally:
        shutil.rmtree(d)


# --------------------------------------------------------------------------- packages
@pytest.fixture(scope="module")
def plan_files(tmp_path_factory):
    from pipeplan.compiler.replay_package import print_module
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import load_pool_toml
    from pipeplan.plan_types import RuntimeConfig

    d = tmp_path_factory.mktemp("plan")
    (d / "pool.toml").write_text(POOL)
    plan = plan_run(read_model_facts(STORIES), RuntimeConfig(max_seq_len=32), load_pool_toml(d / "pool.toml"), 1)
    (d / "plan.mlir").write_text(print_module(plan))
    return d


@pytest.fixture(scope="module")
def package_files(plan_files):
    """name -> text of the package of ``plan_files`` (compiled once)."""
    from pipeplan.compiler.replay_package import build_package_files, compile_plan

    module, runplan = compile_plan(plan_files / "plan.mlir", pool=plan_files / "pool.toml", binder="reference-queue")
    return build_package_files(module, runplan, target="virtual-queue", decode_tokens=2)


def _write_pkg(files, d: Path) -> Path:
    from pipeplan.compiler.replay_package import write_package

    return write_package(files, d)


def test_recompile_keeps_files_the_package_does_not_list(package_files, tmp_path):
    """AB-M-2, item 11: writing a package over an existing package replaces only the files its manifest lists; a
    user's measured.json (and a sub-directory) in it survive, and the result verifies. A file the old
    manifest lists but the new package lacks is removed."""
    from pipeplan.compiler.replay_package import verify_package

    pkg = _write_pkg(package_files, tmp_path / "pkg")
    (pkg / "measured.json").write_text('{"mine": 1}')
    (pkg / "notes").mkdir()
    _write_pkg(package_files, pkg)
    assert (pkg / "measured.json").read_text() == '{"mine": 1}' and (pkg / "notes").is_dir()
    verify_package(pkg)
    no_lineage = dict(package_files)
    del no_lineage["lineage.json"]
    m = json.loads(no_lineage["manifest.json"])
    del m["files"]["lineage.json"]
    from pipeplan.compiler.replay_package import manifest_self_digest

    m["manifest_digest"] = manifest_self_digest(m)
    no_lineage["manifest.json"] = json.dumps(m, sort_keys=True, indent=1) + "\n"
    _write_pkg(no_lineage, pkg)
    assert sorted(x.name for x in pkg.iterdir()) == ["manifest.json", "measured.json", "notes", "predicted.timeline.json",
                                                      "program.mlir"]


def test_cli_recompile_keeps_measured_json(plan_files, capsys, tmp_path):
    """Item 11: `pipeplan compile -o PKG` twice, with a measured.json saved in PKG in between: it is still there."""
    pkg = tmp_path / "pkg"
    argv = ["compile", str(plan_files / "plan.mlir"), "-o", str(pkg), "--binder", "reference-queue", "--decode-tokens", "2"]
    assert main(argv) == 0
    (pkg / "measured.json").write_text("saved")
    assert main(argv) == 0, capsys.readouterr().err
    assert (pkg / "measured.json").read_text() == "saved"


@pytest.mark.parametrize("manifest", [
    '{"format": "pipeplan-replay-package/1"}',
    '{"format": "pipeplan-replay-package/1", "files": {"notes.txt": "sha256:00"}}',
    None,
])
def test_directory_merely_mentioning_the_format_is_not_replaced(package_files, tmp_path, manifest):
    """Item 11: a directory whose manifest.json only mentions the package format (no valid self-digest), or
    lists files that are not package files, is refused (bad_output_path) and nothing in it is touched."""
    from pipeplan.compiler.replay_package import PackageError

    d = tmp_path / "mine"
    d.mkdir()
    (d / "notes.txt").write_text("keep")
    (d / "program.mlir").write_text("my own program")
    if manifest is None:  # a real manifest, edited
        m = json.loads(package_files["manifest.json"])
        m["runtime"]["max_seq_len"] = 999
        manifest = json.dumps(m)
    (d / "manifest.json").write_text(manifest)
    before = {x.name: x.read_bytes() for x in d.iterdir()}
    with pytest.raises(PackageError) as ei:
        _write_pkg(package_files, d)
    assert ei.value.code == "bad_output_path" and "not a replay package" in ei.value.message
    assert {x.name: x.read_bytes() for x in d.iterdir()} == before


def test_edited_package_file_is_not_replaced(package_files, tmp_path):
    """A package whose program.mlir was edited by hand is not overwritten by a recompile (its digest no longer
    matches the manifest): bad_output_path naming the file, the file kept."""
    from pipeplan.compiler.replay_package import PackageError

    pkg = _write_pkg(package_files, tmp_path / "pkg")
    (pkg / "program.mlir").write_text("// my experiment\n")
    with pytest.raises(PackageError, match="program.mlir was changed") as ei:
        _write_pkg(package_files, pkg)
    assert ei.value.code == "bad_output_path" and (pkg / "program.mlir").read_text() == "// my experiment\n"


def test_package_output_that_is_not_a_directory(package_files, hostile):
    """Item 4: `-o` naming a FIFO, device node or socket is refused before compiling (a directory is fine
    when empty: the package goes there)."""
    from pipeplan.compiler.replay_package import PackageError

    kind, p = hostile
    if kind == "directory":
        assert _write_pkg(package_files, p) == p and (p / "manifest.json").is_file()
        return
    with pytest.raises(PackageError) as ei:
        _write_pkg(package_files, p)
    assert ei.value.code == "bad_output_path" and "not a directory" in ei.value.message
    assert not stat.S_ISREG(os.lstat(p).st_mode)


def test_compile_onto_a_full_disk(plan_files, small_tmpfs, capsys):
    """Item 4: `pipeplan compile -o` onto a full file system (a real ENOSPC: a 64 KiB tmpfs, smaller than the
    package) is one error[write_failed] line, and no partial package or temporary directory is left."""
    if small_tmpfs is None:
        pytest.skip("cannot mount a tmpfs here (the mocked ENOSPC of test_enospc_leaves_no_partial_file covers it)")
    rc, out, err = _cli(capsys, ["compile", str(plan_files / "plan.mlir"), "-o", str(small_tmpfs / "pkg"), "--binder",
                                 "reference-queue", "--decode-tokens", "2"], 60)
    _one_error(rc, out, err, "write_failed")
    assert "No space left on device" in err and list(small_tmpfs.iterdir()) == []


def test_tampered_manifest_is_refused_by_replay(package_files, tmp_path, capsys):
    """AB-M-3, item 11: manifest.json is covered by its own digest: `pipeplan replay` of a package whose manifest was
    edited (or lost its digest) is error[package_tampered]."""
    from pipeplan.compiler.replay_package import PackageError, verify_package

    pkg = _write_pkg(package_files, tmp_path / "pkg")
    verify_package(pkg)
    m = json.loads((pkg / "manifest.json").read_text())
    m["runtime"]["max_seq_len"] = 4096
    (pkg / "manifest.json").write_text(json.dumps(m, sort_keys=True, indent=1) + "\n")
    with pytest.raises(PackageError) as ei:
        verify_package(pkg)
    assert ei.value.code == "package_tampered"
    rc, out, err = _cli(capsys, ["replay", str(pkg), "--model", str(STORIES), "--prompt", "hi", "--backend", "direct"])
    _one_error(rc, out, err, "package_tampered")
    del m["manifest_digest"]
    (pkg / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(PackageError, match="has no manifest_digest") as ei:
        verify_package(pkg)
    assert ei.value.code == "package_tampered"


def test_package_file_that_is_a_fifo_is_refused(package_files, tmp_path):
    """Item 4: a package whose program.mlir was replaced by a FIFO is a typed error, not a blocked read."""
    from pipeplan.compiler.replay_package import PackageError, verify_package

    pkg = _write_pkg(package_files, tmp_path / "pkg")
    (pkg / "program.mlir").unlink()
    os.mkfifo(pkg / "program.mlir")
    with pytest.raises(PackageError, match="FIFO"):
        verify_package(pkg)


def test_outputs_refuse_a_device_node_in_every_command(capsys, tmp_path, plan_files):
    """Item 4: --trace / --timeline / -o that name a device node are refused by compile, compare and plan
    (one error line, the node left as it is)."""
    dev = _device(tmp_path)
    pkg = tmp_path / "pkg"
    assert main(["compile", str(plan_files / "plan.mlir"), "-o", str(pkg), "--binder", "reference-queue",
                 "--decode-tokens", "2"]) == 0
    capsys.readouterr()
    pred = str(pkg / "predicted.timeline.json")
    for argv, code in ((["compile", str(plan_files / "plan.mlir"), "-o", str(tmp_path / "p2"), "--trace", str(dev)],
                        "bad_output_path"),
                       (["compile", str(plan_files / "plan.mlir"), "-o", str(tmp_path / "p2"), "--timeline", str(dev)],
                        "bad_output_path"),
                       (["compare", str(pkg), pred, "--trace", str(dev)], "bad_output_path"),
                       (["plan", str(STORIES), "-o", str(dev)], "bad_output_path")):
        rc, out, err = _cli(capsys, argv)
        _one_error(rc, out, err, code)
    assert stat.S_ISCHR(os.lstat(dev).st_mode) and not (tmp_path / "p2").exists()


def test_installed_command_never_replaces_dev_null(tmp_path):
    """Item 4, as a user meets it: `pipeplan compare PKG PRED --trace /dev/null` exits 2 and /dev/null is still
    the character device it was."""
    exe = REPO / ".venv" / "bin" / "pipeplan"
    before = os.stat("/dev/null")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "pipeplan.tools.cli"]
    p = subprocess.run([*cmd, "compare", str(tmp_path), str(tmp_path), "--trace", "/dev/null"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.startswith("error[bad_output_path]: --trace /dev/null: is a character device")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


# --------------------------------------------------------------------------- outputs that are inputs (QA 1/1b/1c)
@pytest.fixture()
def own_model(tmp_path):
    """A private copy of the stories model (tests never write next to the shared one)."""
    m = tmp_path / "victim.gguf"
    shutil.copyfile(STORIES, m)
    return m


def test_plan_output_that_is_the_model_is_refused(capsys, own_model):
    """QA 1: ``plan M -o M`` (even through a symlink) is error[output_is_input]; the model is unchanged."""
    before = own_model.read_bytes()
    rc, out, err = _cli(capsys, ["plan", str(own_model), "--stages", "1", "-o", str(own_model)])
    _one_error(rc, out, err, "output_is_input")
    link = own_model.with_name("alias.gguf")
    os.link(own_model, link)
    rc, out, err = _cli(capsys, ["plan", str(link), "--stages", "1", "-o", str(own_model)])
    _one_error(rc, out, err, "output_is_input")
    assert own_model.read_bytes() == before


def test_read_only_output_is_not_replaced(capsys, own_model, tmp_path):
    """QA 1: an existing output with no write bit (mode 444, refused even for root) is error[write_failed]."""
    target = tmp_path / "p.mlir"
    target.write_text("keep\n")
    target.chmod(0o444)
    rc, out, err = _cli(capsys, ["plan", str(own_model), "--stages", "1", "-o", str(target)])
    _one_error(rc, out, err, "write_failed")
    assert target.read_text() == "keep\n" and "mode 444" in err


def test_run_trace_that_is_the_model_is_refused(capsys, own_model):
    """QA 1b: ``run M --backend direct --trace M`` is refused before any work."""
    before = own_model.stat().st_size
    rc, out, err = _cli(capsys, ["run", str(own_model), "--prompt", "Once", "--max-tokens", "2", "--backend",
                                 "direct", "--trace", str(own_model)])
    _one_error(rc, out, err, "output_is_input")
    assert own_model.stat().st_size == before


def test_compile_trace_that_is_the_plan_is_refused(capsys, plan_files, tmp_path):
    """QA 1c: ``compile P -o pkg --trace P`` keeps the plan; pipeplan-opt ``P -o P`` likewise."""
    plan = tmp_path / "pcopy.mlir"
    shutil.copyfile(plan_files / "plan.mlir", plan)
    before = plan.read_text()
    rc, out, err = _cli(capsys, ["compile", str(plan), "-o", str(tmp_path / "pk3"), "--trace", str(plan)])
    _one_error(rc, out, err, "output_is_input")
    r = subprocess.run([sys.executable, "-m", "pipeplan.tools.opt", str(plan), "-o", str(plan)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.startswith("error[output_is_input]: "), r.stderr
    assert plan.read_text() == before


def test_compile_of_a_binary_file_is_input_not_text(capsys, own_model, tmp_path):
    """QA 6: ``compile M.gguf -o pkg`` (a GGUF given as the plan) is error[input_not_text], as pipeplan-opt."""
    rc, out, err = _cli(capsys, ["compile", str(own_model), "-o", str(tmp_path / "p2")])
    _one_error(rc, out, err, "input_not_text")
    assert "offset" in err and not (tmp_path / "p2").exists()


def test_plan_onto_proc_file_names_the_real_reason(capsys, own_model):
    """QA 6d: ``plan -o /proc/version`` is error[write_failed] saying the file is read-only (not "No such
    file or directory")."""
    if not os.path.isfile("/proc/version"):
        pytest.skip("no /proc/version")
    rc, out, err = _cli(capsys, ["plan", str(own_model), "--stages", "1", "-o", "/proc/version"])
    _one_error(rc, out, err, "write_failed")
    assert "No such file" not in err and "read-only" in err
