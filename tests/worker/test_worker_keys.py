"""Own provider keys and the meter: an owner's key pays for that owner's calls only, those events are
marked and left out of the deployment's totals, keys are encrypted at rest, and nobody reads another
user's events, the keys or the operators' totals."""

from __future__ import annotations

import io
import uuid

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.support import (
    GENERATION_MODEL,
    JUDGE_MODEL,
    KNOWLEDGE,
    ScriptedModel,
    as_user,
    benchmark,
    default_answer,
    fetch,
    question_for,
)
from zm_roi.cli import main
from zm_roi.worker import Worker, WorkerConfig

PASSPHRASE = "correct horse battery staple"


def set_key(monkeypatch, db_url: str, email: str, key: str, passphrase: str | None = PASSPHRASE) -> int:
    monkeypatch.setenv("ZM_DB_URL", db_url)
    if passphrase is None:
        monkeypatch.delenv("ZM_KEY_ENCRYPTION_KEY", raising=False)
    else:
        monkeypatch.setenv("ZM_KEY_ENCRYPTION_KEY", passphrase)
    monkeypatch.setattr("sys.stdin", io.StringIO(key + "\n"))
    return main(["set-key", "--user", email, "--provider", "openai"])


def test_own_key_calls_are_marked_and_left_out_of_the_deployment_totals(
    db_url, worker_url, llm_mode, owners, monkeypatch, capsys
):
    dana = owners.create(KNOWLEDGE[:3])
    erin = owners.create(KNOWLEDGE[3:5])
    assert set_key(monkeypatch, db_url, owners.email(dana), "sk-dana-own-key") == 0
    assert "stored" in capsys.readouterr().out

    [stored] = fetch(db_url, "select encrypted_key from roi.provider_keys where owner_id = %s", (dana,))
    assert b"sk-dana-own-key" not in bytes(stored["encrypted_key"]), "encrypted at rest"

    # A model name of this test's own, so the deployment-wide totals can be read for this test alone.
    generation_model = f"openai/zm-keys-{uuid.uuid4().hex[:8]}"
    config = WorkerConfig(generation_model, JUDGE_MODEL, key_encryption_key=PASSPHRASE)
    model = ScriptedModel(lambda _model, prompt: question_for(prompt))
    benchmark(db_url, dana)
    benchmark(db_url, erin)
    assert Worker(worker_url, config, model).run(once=True) == 5

    keys_used = sorted((call["api_key"] or "deployment") for call in model.calls)
    assert keys_used == ["deployment"] * 2 + ["sk-dana-own-key"] * 3
    marks = fetch(
        db_url,
        "select owner_id, byok, input_tokens + output_tokens as tokens from public.usage_events where model = %s",
        (generation_model,),
    )
    assert {(m["owner_id"], m["byok"]) for m in marks} == {(dana, True), (erin, False)}

    [totals] = fetch(db_url, "select * from roi.deployment_token_totals where model = %s", (generation_model,))
    assert totals["calls"] == 2, "only erin's calls ran on the deployment's key"
    assert totals["input_tokens"] + totals["output_tokens"] == sum(m["tokens"] for m in marks if not m["byok"])
    # Operators read them as service_role, as docs/operations.md says, not as the superuser read above.
    with psycopg.connect(db_url, row_factory=dict_row) as conn, conn.transaction():
        conn.execute("set local role service_role")
        as_operator = conn.execute(
            "select * from roi.deployment_token_totals where model = %s", (generation_model,)
        ).fetchall()
    assert as_operator == [totals]

    # Users read their own events only; the keys and the operators' totals not at all.
    mine = as_user(db_url, dana, "select owner_id from public.usage_events")
    assert {row["owner_id"] for row in mine} == {dana} and len(mine) == 3
    assert as_user(db_url, erin, "select 1 from public.usage_events where owner_id = %(o)s", {"o": dana}) == []
    for forbidden in ("select * from roi.deployment_token_totals", "select * from roi.provider_keys"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            as_user(db_url, dana, forbidden)


def test_a_stored_key_the_worker_cannot_open_is_never_swapped_for_the_deployment_key(
    db_url, worker_url, llm_mode, owners, monkeypatch
):
    frank = owners.create(KNOWLEDGE[:1])
    assert set_key(monkeypatch, db_url, owners.email(frank), "sk-frank-own-key") == 0
    benchmark(db_url, frank)
    model = ScriptedModel(default_answer)
    no_passphrase = WorkerConfig(GENERATION_MODEL, JUDGE_MODEL)
    assert Worker(worker_url, no_passphrase, model).run(once=True) == 1
    assert model.calls == [], "no call was made on the deployment's key instead"
    [probe] = fetch(
        db_url,
        "select p.state, w.last_error from roi.probes p join roi.work w on w.probe_id = p.id where p.owner_id = %s",
        (frank,),
    )
    assert probe["state"] == "pending" and "ZM_KEY_ENCRYPTION_KEY is not set" in probe["last_error"]

    fetch(db_url, "update roi.work set run_after = now() where owner_id = %s returning 1", (frank,))
    wrong = WorkerConfig(GENERATION_MODEL, JUDGE_MODEL, key_encryption_key="not the passphrase")
    assert Worker(worker_url, wrong, model).run(once=True) == 1
    assert model.calls == []
    [probe] = fetch(
        db_url,
        "select p.state, w.last_error from roi.probes p join roi.work w on w.probe_id = p.id where p.owner_id = %s",
        (frank,),
    )
    assert "Wrong key" in probe["last_error"]


def test_set_key_errors_are_one_line(db_url, owners, monkeypatch, capsys):
    gina = owners.create(KNOWLEDGE[:1])
    email = owners.email(gina)
    assert set_key(monkeypatch, db_url, email, "sk-x", passphrase=None) == 2
    assert set_key(monkeypatch, db_url, "nobody@example.test", "sk-x") == 2
    assert set_key(monkeypatch, db_url, email, "") == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("zm-roi: ") for line in errors)
    assert "ZM_KEY_ENCRYPTION_KEY" in errors[0] and "no user nobody@example.test" in errors[1]
    assert "standard input" in errors[2]
    assert fetch(db_url, "select 1 from roi.provider_keys where owner_id = %s", (gina,)) == []


def test_a_missing_provider_key_is_one_clear_error_at_start(worker_url, llm_mode, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ZM_WORKER_DB_URL", worker_url)
    monkeypatch.setenv("ZM_JUDGE_MODEL", "gpt-4o-mini")
    assert main(["worker", "--once"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("zm-roi: missing provider key")
    assert "OPENAI_API_KEY" in err and "Traceback" not in err
