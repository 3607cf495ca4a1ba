"""The part store against an S3 server that checks signatures (issue 31, the runbook):
moto started with ``signed=True`` accepts only requests signed (AWS Signature V4) with the
one key it made, as MinIO or S3 do. With that key from the environment every operation a
sharded run uses works; the server refuses the same request unsigned; a wrong secret or an
unknown key id fails on the first request with one line naming the bucket, the endpoint
and the variables to check, never the secret."""

from __future__ import annotations

import duckdb
import httpx
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from essaybench.core.errors import UserError
from essaybench.store.parts import PartStore
from tests.s3_server import S3Env


def test_parts_round_trip_through_signed_requests(signed_s3: S3Env) -> None:
    table = pl.DataFrame({"id": [1, 2], "essay": ["第一篇", "第二篇"]})
    store = PartStore(signed_s3.url("team"))
    rel = "runs/r1/judge/shard=0/part-1.parquet"
    store.write_parquet(rel, table)
    store.put_json("runs/r1/judge/shard=0/_SUCCESS.json", {"rows": 2})
    other = PartStore(signed_s3.url("team"))  # another machine with the same key
    assert_frame_equal(other.read_parquet(rel), table)
    assert other.read_json("runs/r1/judge/shard=0/_SUCCESS.json") == {"rows": 2}
    assert other.list("runs/r1", ".parquet") == [rel]
    con = duckdb.connect()
    root = other.register(con)
    got = con.execute(f"select count(*) from read_parquet('{root}/runs/r1/judge/*/*.parquet')")
    assert got.fetchall() == [(2,)]
    other.remove_status("runs/r1/judge/shard=0/_SUCCESS.json")
    assert not other.exists("runs/r1/judge/shard=0/_SUCCESS.json")
    # The same object, asked for without a signature, is refused: access is never anonymous.
    anonymous = httpx.get(f"{signed_s3.endpoint}/{signed_s3.bucket}/team/{rel}", timeout=5.0)
    assert anonymous.status_code == 403, anonymous.status_code


@pytest.mark.parametrize("variable", ["AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"])
def test_a_wrong_key_fails_with_one_clear_line(
        signed_s3: S3Env, monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    wrong = "wrong-" + "x" * 30 if variable == "AWS_SECRET_ACCESS_KEY" else "AKIAWRONGKEY0000000"
    monkeypatch.setenv(variable, wrong)
    store = PartStore(signed_s3.url("team"))
    with pytest.raises(UserError) as err:
        store.write_json("runs/r1/plan.json", {"x": 1})
    message = str(err.value)
    assert "\n" not in message
    assert signed_s3.url("team") in message and signed_s3.endpoint in message
    assert "access denied" in message
    assert "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY" in message
    assert wrong not in message
