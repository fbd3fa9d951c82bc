"""Weight sources: local files, the sha256-keyed cache, and http(s) downloads from a loopback server."""

from __future__ import annotations

import hashlib
import http.server
import socket
import threading
from pathlib import Path

import pytest
from pipeplan.errors import StageFault
from pipeplan.plan_types import WeightSource
from pipeplan.runtime.weights_source import cached_path, default_cache_dir, find_cached, resolve_weight_source

from tests.conftest import STORIES

DATA = STORIES.read_bytes()
SHA = hashlib.sha256(DATA).hexdigest()


class _Server:
    """A loopback HTTP server in a thread. ``mode``: ok | truncated (Content-Length of the whole file,
    half the body, then close). ``requests`` lists the paths asked for."""

    def __init__(self):
        self.mode = "ok"
        self.requests: list[str] = []
        srv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server API
                srv.requests.append(self.path)
                if not self.path.endswith(".gguf"):
                    self.send_error(404)
                    return
                body = DATA
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body if srv.mode == "ok" else body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/models/stories260K.gguf"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server():
    s = _Server()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _reset(server):
    server.mode = "ok"
    server.requests.clear()


def _files(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file() or p.is_symlink())


def test_local_path_is_used_in_place(tmp_path):
    """WL-L-1: a local GGUF path resolves to itself (no copy into the cache)."""
    out = resolve_weight_source(WeightSource((str(STORIES),), (), (len(DATA),)), stage=0, cache_dir=tmp_path)
    assert out == [STORIES] and _files(tmp_path) == []


def test_local_file_uri_and_missing_file(tmp_path):
    """file:// URIs resolve; a missing local file that is not cached faults the stage with kind download
    (WL-F-1); a size that disagrees with the plan does too."""
    assert resolve_weight_source(WeightSource((STORIES.as_uri(),)), stage=0, cache_dir=tmp_path) == [STORIES]
    with pytest.raises(StageFault) as e:
        resolve_weight_source(WeightSource((str(tmp_path / "nope.gguf"),)), stage=2, cache_dir=tmp_path)
    assert (e.value.kind, e.value.stage) == ("download", 2) and "not cached" in e.value.detail
    with pytest.raises(StageFault, match="the plan says 5"):
        resolve_weight_source(WeightSource((str(STORIES),), (), (5,)), stage=0, cache_dir=tmp_path)
    with pytest.raises(StageFault, match="1 sha256 entries for 2 shard"):
        resolve_weight_source(WeightSource((str(STORIES), str(STORIES)), (SHA,)), stage=0, cache_dir=tmp_path)
    with pytest.raises(StageFault, match="names no URI"):
        resolve_weight_source(WeightSource(()), stage=0, cache_dir=tmp_path)


def test_download_caches_by_sha256_and_second_run_makes_no_request(server, tmp_path):
    """WL-L-3, WL-R-1: an http URL is downloaded into <cache>/<sha256>/<name> with size and sha256
    checked; a second resolve finds it by sha256 without any request."""
    src = WeightSource((server.url,), (SHA,), (len(DATA),))
    seen: list[str] = []
    out = resolve_weight_source(src, stage=0, cache_dir=tmp_path, on_request=seen.append)
    assert out == [cached_path(tmp_path, SHA, "stories260K.gguf")]
    assert out[0].read_bytes() == DATA and server.requests == ["/models/stories260K.gguf"] and seen == [server.url]
    assert _files(tmp_path) == out  # no temporary file left behind
    again = resolve_weight_source(src, stage=1, cache_dir=tmp_path, on_request=seen.append)
    assert again == out and len(server.requests) == 1 and len(seen) == 1
    # a local path that is gone on this node but whose sha256 is cached resolves to the cached artifact
    gone = WeightSource((str(tmp_path / "elsewhere" / "stories260K.gguf"),), (SHA,))
    assert resolve_weight_source(gone, stage=0, cache_dir=tmp_path) == out and find_cached(tmp_path, SHA) == out[0]


def test_wrong_sha256_faults_and_leaves_no_file(server, tmp_path):
    """WL-F-1: a body whose sha256 differs from the plan's faults the stage (download) and leaves no
    half-written file in the cache."""
    with pytest.raises(StageFault) as e:
        resolve_weight_source(WeightSource((server.url,), ("0" * 64,)), stage=1, cache_dir=tmp_path)
    assert (e.value.kind, e.value.stage) == ("download", 1) and "sha256 mismatch" in e.value.detail
    assert _files(tmp_path) == []


def test_truncated_body_faults_and_leaves_no_file(server, tmp_path):
    """WL-F-1: a body shorter than its Content-Length faults the stage (download); no partial file stays."""
    server.mode = "truncated"
    with pytest.raises(StageFault) as e:
        resolve_weight_source(WeightSource((server.url,), (SHA,)), stage=0, cache_dir=tmp_path)
    assert e.value.kind == "download" and server.requests
    assert _files(tmp_path) == []


def test_wrong_declared_size_faults(server, tmp_path):
    """WL-F-1, WL-R-1: a download whose byte count differs from the plan's declared size faults (download), no file left."""
    with pytest.raises(StageFault, match="size mismatch"):
        resolve_weight_source(WeightSource((server.url,), (), (len(DATA) + 1,)), stage=0, cache_dir=tmp_path)
    assert _files(tmp_path) == []


def test_connection_error_faults(tmp_path):
    """WL-F-1: a refused connection faults the stage with kind download; nothing is left in the cache."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    with pytest.raises(StageFault) as e:
        resolve_weight_source(WeightSource((f"http://127.0.0.1:{port}/m.gguf",)), stage=3, cache_dir=tmp_path)
    assert (e.value.kind, e.value.stage) == ("download", 3) and "cannot download" in e.value.detail
    assert _files(tmp_path) == []


def test_http_error_status_faults(server, tmp_path):
    """WL-F-1: an HTTP error status (404) is a download fault; nothing is left in the cache."""
    with pytest.raises(StageFault, match="404"):
        resolve_weight_source(WeightSource((server.url + ".missing",)), stage=0, cache_dir=tmp_path)
    assert _files(tmp_path) == []


def test_cached_shards_are_presented_with_their_names(server, tmp_path):
    """WL-L-2, WL-L-3: shards found in the cache (one digest directory each) are linked into one set
    directory under their gguf-split names, so the header reader finds the siblings."""
    from pipeplan.frontend.gguf_facts import read_model_facts

    from tests.ggufgen import write_split

    shards = write_split(STORIES, tmp_path / "src", 3)
    cache = tmp_path / "cache"
    shas = []
    for p in shards:
        sha = hashlib.sha256(p.read_bytes()).hexdigest()
        shas.append(sha)
        dst = cached_path(cache, sha, p.name)
        dst.parent.mkdir(parents=True)
        dst.write_bytes(p.read_bytes())
    src = WeightSource(tuple(f"http://127.0.0.1:1/{p.name}" for p in shards), tuple(shas))
    out = resolve_weight_source(src, stage=0, cache_dir=cache)
    assert [p.name for p in out] == [p.name for p in shards] and len({p.parent for p in out}) == 1
    assert [p.read_bytes() for p in out] == [p.read_bytes() for p in shards] and not server.requests
    facts = read_model_facts(out[0])
    assert facts.block_count == 5 and len(facts.files) == 3


def test_default_cache_dir_follows_env(monkeypatch, tmp_path):
    """The cache is $PIPEPLAN_CACHE, else ~/.cache/pipeplan."""
    monkeypatch.setenv("PIPEPLAN_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path
    monkeypatch.delenv("PIPEPLAN_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "pipeplan"
