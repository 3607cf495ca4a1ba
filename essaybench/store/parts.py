"""Immutable files under one root URL, shared by the machines of a scaled-out run.

The root is a local folder (the default) or ``s3://bucket/prefix`` on any S3-compatible
server, reached through fsspec (s3fs). Shards write Parquet parts and small JSON files
here, never the DuckDB catalog (one writer per file); one merge step reads the parts back.

Paths below the root are '/'-separated ("runs/<run>/judge/shard=3/part-<uuid>.parquet").
A part, once written, is never replaced: a writer publishes it in one step (local: a
hidden temp file in the same folder, fsynced, then hard-linked to its name, which fails if
the name exists; S3: one PUT with ``If-None-Match: *``), so a reader sees all of a part or
nothing, and two writers of one name cannot both win. Only ``put_json`` overwrites (status
and heartbeat files).

The S3 endpoint comes from ``storage_options["endpoint_url"]`` or $ESSAYBENCH_S3_ENDPOINT_URL;
credentials only from the standard AWS variables (or the machine's AWS configuration).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import duckdb
import polars as pl

from essaybench.core.errors import NotFoundError, UserError
from essaybench.core.files import TargetExistsError, write_atomically

PARTS_URL_ENV = "ESSAYBENCH_PARTS_URL"  # e.g. s3://essaybench/team-store
S3_ENDPOINT_ENV = "ESSAYBENCH_S3_ENDPOINT_URL"  # e.g. http://127.0.0.1:9000
# Values never to repeat in a message, wherever a library error quoted them.
_SECRET_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
_CREDENTIALS_HINT = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"


class PartExistsError(FileExistsError):
    """A part is already stored under that name; parts are never overwritten."""


class PartNotFoundError(NotFoundError, FileNotFoundError):
    """No part is stored under that name."""


def check_rel(rel: str, *, allow_empty: bool = False) -> str:
    """``rel`` when it is a clean '/'-separated path below the root, else ValueError."""
    if not isinstance(rel, str):
        raise ValueError(f"part path must be a string, got {type(rel).__name__}")
    segments = rel.split("/")
    problem = (
        None if rel == "" and allow_empty else
        "is empty" if rel == "" else
        "starts with '/' (paths are relative to the store's root)" if rel.startswith("/") else
        "contains '\\' (use '/')" if "\\" in rel else
        "contains a glob character (one of * ? [ ])" if any(c in rel for c in "*?[]") else
        "has an empty segment ('//' or a trailing '/')" if "" in segments else
        "has a '.' or '..' segment" if {".", ".."} & set(segments) else
        "has a hidden segment (a leading '.' marks temporary files)"
        if any(x.startswith(".") for x in segments) else None)
    if problem:
        raise ValueError(f"bad part path {rel!r}: it {problem}")
    return rel


def _redact_url(url: str) -> str:
    """``url`` without any user:password in it."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


class PartStore:
    """Immutable files under ``url``: a local folder or ``s3://bucket/prefix``."""

    def __init__(self, url: str | Path, *,
                 storage_options: Mapping[str, Any] | None = None) -> None:
        self._local: Path | None = None
        self._bucket = ""
        self._prefix = ""  # key prefix below the bucket, no slashes at either end
        self._options = dict(storage_options or {})
        self._s3: Any = None  # s3fs.S3FileSystem, made on first use
        self._checked = False  # the bucket answered once
        text = str(url).strip()
        if not text:
            raise UserError("part store URL is empty: give a folder or s3://bucket/prefix")
        scheme = urlsplit(text).scheme if "://" in text else ""
        if scheme in ("", "file"):
            self._local = Path(os.path.abspath(
                Path(urlsplit(text).path if scheme else text).expanduser()))
            self.url = str(self._local)
        elif scheme == "s3":
            rest = text[len("s3://"):].strip("/")
            self._bucket, _, self._prefix = rest.partition("/")
            if not self._bucket:
                raise UserError(f"{text}: no bucket named (expected s3://bucket/prefix)")
            if self._prefix:
                try:
                    check_rel(self._prefix)
                except ValueError as exc:
                    raise UserError(f"{text}: bad prefix: {exc}") from None
            self.url = f"s3://{self._bucket}/{self._prefix}".rstrip("/")
            endpoint = self._options.get("endpoint_url") or (
                self._options.get("client_kwargs") or {}).get("endpoint_url")
            if not endpoint and os.environ.get(S3_ENDPOINT_ENV):
                self._options["endpoint_url"] = os.environ[S3_ENDPOINT_ENV].strip()
        else:
            raise UserError(f"{_redact_url(text)}: unsupported storage scheme {scheme!r} "
                            "(use a local folder or s3://bucket/prefix)")

    @classmethod
    def for_store(cls, store_root: Path | str) -> PartStore:
        """$ESSAYBENCH_PARTS_URL when set, else ``<store_root>/parts`` on the local disk."""
        configured = os.environ.get(PARTS_URL_ENV, "").strip()
        return cls(configured) if configured else cls(Path(store_root) / "parts")

    def __repr__(self) -> str:  # never the storage options: they may hold credentials
        return f"PartStore({self.url!r})"

    @property
    def is_local(self) -> bool:
        return self._local is not None

    def uri(self, rel: str) -> str:
        check_rel(rel)
        return str(self._local / rel) if self._local is not None else f"{self.url}/{rel}"

    # --- bytes: the two primitives everything else is built on -----------------------------

    def write_bytes(self, rel: str, data: bytes, *, overwrite: bool = False) -> str:
        """Publish ``data`` under ``rel`` in one step; PartExistsError unless ``overwrite``."""
        target = self.uri(rel)
        if self._local is not None:
            try:
                write_atomically(self._local / rel, data, overwrite=overwrite)
            except TargetExistsError:
                raise _exists(target) from None
            return target
        fs = self._fs()
        with self._s3_errors(target):
            if not overwrite and fs.isfile(self._key(rel)):
                raise _exists(target)  # checked first too: some servers ignore If-None-Match
            try:
                fs.pipe_file(self._key(rel), data, mode="overwrite" if overwrite else "create")
            except FileExistsError:
                raise _exists(target) from None
        return target

    def read_bytes(self, rel: str) -> bytes:
        target = self.uri(rel)
        if self._local is not None:
            with self._reading(target):
                return (self._local / rel).read_bytes()
        fs = self._fs()
        with self._reading(target):
            data: bytes = fs.cat_file(self._key(rel))
        return data

    # --- Parquet and JSON ------------------------------------------------------------------

    def write_parquet(self, rel: str, table: pl.DataFrame) -> str:
        buffer = io.BytesIO()
        table.write_parquet(buffer)
        return self.write_bytes(rel, buffer.getvalue())

    def read_parquet(self, rel: str) -> pl.DataFrame:
        return pl.read_parquet(io.BytesIO(self.read_bytes(rel)))

    def read_parquets(self, rels: Sequence[str]) -> pl.DataFrame:
        """The parts concatenated in the given order (columns matched by name)."""
        if not rels:
            return pl.DataFrame()
        if self._local is not None:
            blobs = [self.read_bytes(rel) for rel in rels]
        else:  # concurrent GETs rather than a round trip per part (check_rel: no globs)
            keys = [self._key(check_rel(rel)) for rel in rels]
            fs = self._fs()
            with self._s3_errors(self.url):
                fetched = fs.cat(keys, on_error="return")
            blobs = []
            for rel, key in zip(rels, keys, strict=True):
                blob = fetched.get(key, FileNotFoundError(key))
                if isinstance(blob, BaseException):
                    with self._reading(self.uri(rel)):
                        raise blob
                blobs.append(blob)
        frames = [pl.read_parquet(io.BytesIO(blob)) for blob in blobs]
        return frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")

    def write_json(self, rel: str, obj: Any) -> str:
        return self.write_bytes(rel, _json_bytes(obj))

    def put_json(self, rel: str, obj: Any) -> str:
        """Like ``write_json`` but replaces what is there (status and heartbeat files)."""
        return self.write_bytes(rel, _json_bytes(obj), overwrite=True)

    def read_json(self, rel: str) -> Any | None:
        """The decoded file, None when there is none."""
        try:
            data = self.read_bytes(rel)
        except PartNotFoundError:
            return None
        try:
            return json.loads(data.decode("utf-8"))
        except ValueError as exc:
            raise ValueError(f"{self.uri(rel)}: not valid JSON ({exc})") from None

    def remove_status(self, rel: str) -> None:
        """Delete a status file (one ``put_json`` writes; e.g. a shard's ``_SUCCESS.json``,
        to send that shard again). Parts are never deleted; a missing file is no error."""
        target = self.uri(rel)
        if self._local is not None:
            (self._local / rel).unlink(missing_ok=True)
            return
        fs = self._fs()
        with self._s3_errors(target):
            if fs.isfile(self._key(rel)):
                fs.rm_file(self._key(rel))

    # --- what is there ---------------------------------------------------------------------

    def exists(self, rel: str) -> bool:
        target = self.uri(rel)
        if self._local is not None:
            return (self._local / rel).is_file()
        fs = self._fs()
        with self._s3_errors(target):
            return bool(fs.isfile(self._key(rel)))

    def list(self, prefix: str, suffix: str = "") -> list[str]:
        """Paths (relative to the root) of the files under the folder ``prefix`` ("" for
        all) whose names end with ``suffix``, sorted; [] when there is no such folder."""
        check_rel(prefix, allow_empty=True)
        if self._local is not None:
            rels = [Path(folder, name).relative_to(self._local).as_posix()
                    for folder, _, names in os.walk(self._local / prefix) for name in names]
        else:
            root_key = self._key(prefix) if prefix else self._key("").rstrip("/")
            fs = self._fs()
            with self._s3_errors(self.uri(prefix) if prefix else self.url):
                keys: list[str] = fs.find(root_key)
            base = self._key("")
            rels = [k[len(base):] for k in keys if k.startswith(root_key + "/")]
        return sorted(r for r in rels if r.endswith(suffix)
                      and not any(s.startswith(".") for s in r.split("/")))

    def register(self, con: duckdb.DuckDBPyConnection) -> str:
        """The root to write in DuckDB paths (``read_parquet('<root>/runs/x/*.parquet')``).

        Remote: this store's filesystem is registered with ``con`` first (DuckDB's wheel has
        no httpfs). DuckDB keeps one filesystem per scheme, so the last store registered on
        a connection serves all its s3:// paths."""
        if self._local is not None:
            return self.url
        fs = self._fs()
        if "s3" in con.list_filesystems():
            con.unregister_filesystem("s3")
        con.register_filesystem(fs)
        return self.url

    def ensure_root(self) -> None:
        """Create the bucket (S3) or the folder (local) when missing: for tests and ops."""
        if self._local is not None:
            self._local.mkdir(parents=True, exist_ok=True)
            return
        fs = self._fs(check=False)
        with self._s3_errors(self.url):
            try:
                fs.call_s3("head_bucket", Bucket=self._bucket)
            except FileNotFoundError:
                fs.mkdir(self._bucket)
        self._checked = True

    # --- internals -------------------------------------------------------------------------

    def _key(self, rel: str) -> str:
        """The s3fs path of ``rel``; of "" the root, with a trailing '/'."""
        return "/".join(p for p in (self._bucket, self._prefix, rel) if p) + ("" if rel else "/")

    def _fs(self, *, check: bool = True) -> Any:
        """The S3 filesystem; its first checked use asks for the bucket, so a wrong
        endpoint, missing credentials or a missing bucket fail there with one clear line."""
        if self._s3 is None:
            try:
                import s3fs  # type: ignore[import-untyped]
            except ImportError:
                raise UserError(f"{self.url}: S3 storage needs s3fs: "
                                "pip install 'essaybench[s3]'") from None
            options = dict(self._options)
            retries = options.pop("retries", None)  # s3fs's own retry count (an attribute)
            # No instance cache and no listing cache: other machines write here too.
            self._s3 = s3fs.S3FileSystem(**{**options, "skip_instance_cache": True,
                                            "use_listings_cache": False})
            if retries is not None:
                self._s3.retries = int(retries)
        if check and not self._checked:
            with self._s3_errors(self.url):
                self._s3.call_s3("head_bucket", Bucket=self._bucket)
            self._checked = True
        return self._s3

    def _endpoint(self) -> str:
        endpoint = self._options.get("endpoint_url") or (
            self._options.get("client_kwargs") or {}).get("endpoint_url")
        return _redact_url(str(endpoint)) if endpoint else "the default AWS endpoint"

    def _scrub(self, text: str) -> str:
        values = [os.environ.get(name, "") for name in _SECRET_ENV]
        values += [str(self._options.get(k, "")) for k in ("key", "secret", "token")]
        for value in values:
            if len(value) >= 4:
                text = text.replace(value, "***")
        return text

    @contextmanager
    def _s3_errors(self, target: str) -> Iterator[None]:
        """What the user can fix, as one UserError naming ``target`` and the endpoint."""
        import botocore.exceptions as boto  # type: ignore[import-untyped]

        where = f"{_redact_url(target)} (endpoint {self._endpoint()})"
        try:
            yield
        except (PartExistsError, PartNotFoundError):
            raise
        except FileNotFoundError as exc:
            # s3fs's words for NoSuchBucket; HEAD on a bucket has no body, hence "Not Found"
            if "bucket does not exist" in str(exc).lower() or str(exc) == "Not Found":
                raise UserError(f"{where}: bucket {self._bucket!r} does not exist") from exc
            raise
        except PermissionError as exc:
            raise UserError(f"{where}: access denied ({self._scrub(str(exc))}); check "
                            "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and the bucket's "
                            "policy") from exc
        except boto.NoCredentialsError as exc:
            raise UserError(f"{where}: no S3 credentials: {_CREDENTIALS_HINT}") from exc
        except (boto.ConnectionError, boto.HTTPClientError) as exc:
            raise UserError(f"{where}: cannot reach the S3 endpoint, or it does not answer "
                            f"({type(exc).__name__})") from exc
        except boto.BotoCoreError as exc:
            raise UserError(f"{where}: {type(exc).__name__}: {self._scrub(str(exc))}") from exc

    @contextmanager
    def _reading(self, target: str) -> Iterator[None]:
        """A missing file as PartNotFoundError (and S3 errors as for any call)."""
        try:
            if self._local is not None:
                yield
            else:
                with self._s3_errors(target):
                    yield
        except (FileNotFoundError, IsADirectoryError) as exc:
            if isinstance(exc, PartNotFoundError):
                raise
            raise PartNotFoundError(f"{target}: no such part") from None


def ensure_bucket(url: str | Path, *,
                  storage_options: Mapping[str, Any] | None = None) -> PartStore:
    """The store at ``url``, its bucket (or folder) created when missing."""
    store = PartStore(url, storage_options=storage_options)
    store.ensure_root()
    return store


def _exists(target: str) -> PartExistsError:
    return PartExistsError(f"{target} already exists: parts are immutable "
                           "(write a new part instead)")


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, sort_keys=True, indent=2) + "\n").encode("utf-8")
