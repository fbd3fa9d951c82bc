"""Resolve a stage's :class:`~pipeplan.plan_types.WeightSource` to local file paths (seed 001 "Loading").

Supported sources, per shard URI (one URI for a whole GGUF, one per shard for a gguf-split set):

- a local path (or ``file://`` URI) that exists: used in place (WL-L-1, WL-L-2);
- a cached artifact already on the node: ``<cache>/<sha256>/<file name>``; found by the shard's
  sha256, without any request (WL-L-3). A local path that is missing but whose sha256 is cached
  also resolves to the cache;
- an ``http(s)://`` URL: downloaded with :mod:`urllib` into the cache, streaming into a temporary
  file *inside the cache directory* while hashing; the size (declared ``sizes[i]`` and the
  ``Content-Length``) and sha256 (declared ``sha256[i]``) are checked, then the file is atomically
  renamed to ``<cache>/<sha256>/<file name>`` (the URL's last path segment, so gguf-split names
  ``<prefix>-NNNNN-of-MMMMM.gguf`` survive). Any failure (connection error, HTTP error, truncated body,
  wrong size or digest) removes the temporary file, so no half-written file is ever left in the
  cache, and raises ``StageFault(kind="download")`` (WL-F-1).

The cache directory is ``$PIPEPLAN_CACHE`` or ``~/.cache/pipeplan``. A tqdm progress bar is shown
for downloads only when stderr is a TTY.

A gguf-split set whose shards resolve to different directories (each cached shard has its own
digest directory) is presented to the parser as ``<cache>/sets/<digest>/`` holding symbolic links
named after the shards, because the GGUF reader finds sibling shards by file name.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from pipeplan.errors import PipeplanError, StageFault
from pipeplan.files.cache import CACHE_ENV, default_cache_dir
from pipeplan.plan_types import WeightSource

CHUNK = 1 << 20


class CacheError(PipeplanError):
    """The package/weight cache directory cannot be used (code ``cache_unusable``): it is a file, or it
    cannot be created or written (read-only, permission denied, no space left)."""

    code = "cache_unusable"


def cache_source(cache_dir: str | os.PathLike | None) -> str:
    """How messages name the cache directory: ``--cache-dir X``, ``$PIPEPLAN_CACHE X`` or ``cache X``."""
    if cache_dir is not None:
        return f"--cache-dir {cache_dir}"
    if os.environ.get(CACHE_ENV):
        return f"${CACHE_ENV} {os.environ[CACHE_ENV]}"
    return f"cache {default_cache_dir()}"


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache directory (``cache_dir`` or :func:`default_cache_dir`), checked without writing: absent (it
    is created when first written) or a directory. Raises CacheError naming it when it (or a parent) is a
    file or something else that is not a directory."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    up = root
    while True:
        try:
            st = up.stat()
        except FileNotFoundError:
            if up == up.parent:
                break
            up = up.parent
            continue
        except NotADirectoryError:
            up = up.parent
            continue
        except OSError as e:
            raise CacheError(f"{cache_source(cache_dir)}: cannot stat {up}: {e.strerror or e}", where=str(root)) from None
        if not stat.S_ISDIR(st.st_mode):
            what = "is not a directory" if up == root else f"has a parent {up} that is not a directory"
            raise CacheError(f"{cache_source(cache_dir)}: {what}", where=str(root))
        break
    return root


def cache_write_error(cache_dir: str | os.PathLike | None, what: str, e: OSError) -> CacheError:
    """The CacheError of an OS error ``e`` while writing ``what`` into the cache (no space, read-only...)."""
    return CacheError(f"{cache_source(cache_dir)}: cannot write {what}: {e.strerror or e}",
                      where=str(cache_dir or default_cache_dir()))


@contextlib.contextmanager
def staged_with_pool(cache_dir: str | os.PathLike | None, final: Path, pool_text: str, what: str) -> Iterator[Path]:
    """A fresh directory ``.<final name>.<random>`` beside ``final`` holding ``pool.toml`` (``pool_text``), removed
    on exit: build there, then move the result onto ``final``. Raises CacheError naming ``what`` (or the
    directory) when the cache cannot be written."""
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    except OSError as e:
        raise cache_write_error(cache_dir, f"the package directory {final.parent}", e) from None
    try:
        try:
            (tmp / "pool.toml").write_text(pool_text)
        except OSError as e:
            raise cache_write_error(cache_dir, what, e) from None
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def cached_path(cache_dir: Path, sha256: str, name: str = "model.gguf") -> Path:
    """Where the artifact with digest ``sha256`` (64 hex chars) and file name ``name`` lives."""
    return Path(cache_dir) / sha256.lower() / name


def find_cached(cache_dir: Path, sha256: str) -> Path | None:
    """The cached artifact with digest ``sha256`` (the one file in ``<cache>/<sha256>/``), or None."""
    d = Path(cache_dir) / sha256.lower()
    if not d.is_dir():
        return None
    files = sorted(p for p in d.iterdir() if p.is_file() and not p.name.startswith("."))
    return files[0] if len(files) == 1 else None


def _url_name(url: str) -> str:
    name = Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path)).name
    return name if name and not name.startswith(".") else "model.gguf"


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _is_url(uri: str) -> bool:
    return urllib.parse.urlsplit(uri).scheme in ("http", "https")


def _local_path(uri: str) -> Path:
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme == "file":
        return Path(urllib.parse.unquote(parts.path))
    return Path(uri)


def _progress(total: int | None, desc: str):
    """A tqdm bar on a TTY, else None."""
    if not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, unit="B", unit_scale=True, desc=desc, leave=False)


def download(url: str, cache_dir: Path, *, stage: int, sha256: str | None = None, size: int | None = None,
             timeout: float = 60.0, on_request: Callable[[str], None] | None = None) -> Path:
    """Download ``url`` into ``cache_dir`` (verified, atomic; see the module docstring).

    Args:
        url: an http(s) URL.
        cache_dir: the cache directory (created if missing).
        stage: the stage index, for the fault.
        sha256: the expected hex digest, or None (then the file is cached under its computed digest).
        size: the expected size in bytes, or None.
        timeout: socket timeout in seconds.
        on_request: called with the URL just before the request (tests count requests with it).
    Returns: ``<cache>/<sha256>/<URL file name>``.
    Raises:
        StageFault(kind="download"): connection/HTTP error, truncated body (fewer bytes than
        Content-Length or ``size``), wrong size, wrong sha256, or a cache directory that cannot be
        created or written. The temporary file is removed.
    """
    cache_dir = Path(cache_dir)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=".download-", suffix=".part", dir=cache_dir)
    except OSError as e:
        raise StageFault("download", stage, f"cannot download {url}: the cache {cache_dir} is unusable: "
                                            f"{e.strerror or e}") from None
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    got = 0
    try:
        if on_request is not None:
            on_request(url)
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
                length = resp.headers.get("Content-Length")
                expect = int(length) if length is not None else size
                bar = _progress(expect, f"stage {stage} download")
                try:
                    while chunk := resp.read(CHUNK):
                        out.write(chunk)
                        h.update(chunk)
                        got += len(chunk)
                        if bar is not None:
                            bar.update(len(chunk))
                finally:
                    if bar is not None:
                        bar.close()
        except (urllib.error.URLError, OSError, ValueError) as e:
            # http.client.IncompleteRead is an HTTPException (not OSError) on some paths: handled below
            raise StageFault("download", stage, f"cannot download {url}: {e}") from None
        except Exception as e:  # http.client.IncompleteRead / RemoteDisconnected and friends
            raise StageFault("download", stage, f"cannot download {url}: {type(e).__name__}: {e}") from None
        if length is not None and got != int(length):
            raise StageFault("download", stage, f"truncated download of {url}: got {got} of {length} bytes")
        if size is not None and got != size:
            raise StageFault("download", stage, f"size mismatch for {url}: got {got} bytes, expected {size}")
        digest = h.hexdigest()
        if sha256 is not None and digest != sha256.lower():
            raise StageFault("download", stage, f"sha256 mismatch for {url}: got {digest}, expected {sha256.lower()}")
        dst = cached_path(cache_dir, digest, _url_name(url))
        try:
            dst.parent.mkdir(exist_ok=True)
            os.replace(tmp, dst)  # atomic within one file system
        except OSError as e:
            raise StageFault("download", stage, f"cannot place {url} in the cache at {dst}: {e.strerror or e}") from None
        return dst
    finally:
        if tmp.exists():
            tmp.unlink()


def resolve_weight_source(source: WeightSource, *, stage: int, cache_dir: str | os.PathLike | None = None,
                          on_request: Callable[[str], None] | None = None) -> list[Path]:
    """Local paths, one per shard, for ``source`` (see the module docstring for the rules).

    Args:
        source: the stage's weight source (WL-A-1); ``sha256``/``sizes`` are per shard or empty.
        stage: stage index (for faults).
        cache_dir: cache directory; default :func:`default_cache_dir`.
        on_request: forwarded to :func:`download`.
    Returns: ``len(source.uris)`` existing local paths, in shard order.
    Raises:
        StageFault(kind="download"): no URIs, a mismatched sha256/sizes list, a missing local file
        that is not cached, or any download failure.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    uris = tuple(source.uris)
    if not uris:
        raise StageFault("download", stage, "weight source names no URI")
    for what, values in (("sha256", source.sha256), ("sizes", source.sizes)):
        if values and len(values) != len(uris):
            raise StageFault("download", stage,
                             f"weight source has {len(values)} {what} entries for {len(uris)} shard URIs")
    out: list[Path] = []
    for i, uri in enumerate(uris):
        sha = source.sha256[i] if source.sha256 else None
        size = source.sizes[i] if source.sizes else None
        if sha:
            hit = find_cached(cache, sha)
            if hit is not None and (size is None or hit.stat().st_size == size):
                out.append(hit)
                continue
        if _is_url(uri):
            out.append(download(uri, cache, stage=stage, sha256=sha, size=size, on_request=on_request))
            continue
        path = _local_path(uri)
        if not path.is_file():
            raise StageFault("download", stage, f"weight file {uri} does not exist on this node and is not cached")
        if size is not None and path.stat().st_size != size:
            raise StageFault("download", stage,
                             f"weight file {uri} has {path.stat().st_size} bytes, the plan says {size}")
        out.append(path)
    if len(out) > 1 and len({p.parent for p in out}) > 1:
        out = _link_shard_set(cache, out, uris)
    return out


def local_weight_files(source: WeightSource, cache_dir: str | os.PathLike | None = None) -> list[Path] | None:
    """The local paths of ``source`` as :func:`resolve_weight_source` gives them, when that needs no download
    (every shard a local file, or a URL whose sha256 is in the cache); None when a shard would have to be
    downloaded or is missing (what the orchestrator reads the model's header from, never fetching weights)."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    for i, uri in enumerate(source.uris):
        if not _is_url(uri):
            continue
        hit = find_cached(cache, source.sha256[i]) if i < len(source.sha256) and source.sha256[i] else None
        size = source.sizes[i] if i < len(source.sizes) else None
        if hit is None or (size is not None and hit.stat().st_size != size):
            return None
    try:
        return resolve_weight_source(source, stage=0, cache_dir=cache)
    except StageFault:
        return None


def _link_shard_set(cache: Path, paths: list[Path], uris: tuple[str, ...]) -> list[Path]:
    """Symbolic links to ``paths`` in one directory, named after the shard URIs' file names."""
    key = hashlib.sha256("\0".join(str(p.absolute()) for p in paths).encode()).hexdigest()[:32]
    d = cache / "sets" / key
    d.mkdir(parents=True, exist_ok=True)
    links = []
    for p, uri in zip(paths, uris, strict=True):
        name = _url_name(uri) if _is_url(uri) else _local_path(uri).name
        link = d / name
        if not (link.is_symlink() and Path(os.readlink(link)) == p.absolute()):
            tmp = d / f".{name}.{os.getpid()}.tmp"
            if tmp.is_symlink() or tmp.exists():
                tmp.unlink()
            tmp.symlink_to(p.absolute())
            os.replace(tmp, link)
        links.append(link)
    return links
