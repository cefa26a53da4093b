"""An import's embedding runs one pass per offline model, each with its own progress line and time left:
the line says which pass it is, so that the first pass's time left is not read as the whole import's."""

from __future__ import annotations

from zm_roi import backfill, embeddings


class _Counts:
    """A connection that answers every count query with 5 rows to embed."""

    def execute(self, sql, params=None):
        return self

    def fetchone(self):
        return (5,)


def test_each_offline_pass_says_which_of_the_two_it_is(monkeypatch):
    """(Fails with the `step` left out of embed_every_leg: both lines then read as if each were the last.)"""
    labels = []

    class Recorded(backfill.Progress):
        def __init__(self, label, total, **kwargs):
            labels.append(label)
            super().__init__(label, total, **kwargs)

    monkeypatch.setattr(backfill, "Progress", Recorded)
    left = {"embedding": [5], "embedding_minilm": [5]}
    monkeypatch.setattr(backfill, "query", lambda name: name)
    monkeypatch.setattr(
        backfill,
        "_embed_batch",
        lambda conn, model, select, store, ids: (
            left["embedding_minilm" if "minilm" in select else "embedding"] or [0]
        ).pop(),
    )
    done = backfill.embed_every_leg(_Counts(), embeddings.configured_models({}), quiet=True)
    assert done == 5
    assert labels == [
        f"embedding with {embeddings.MINILM_MODEL} (pass 1 of 2)",
        f"embedding with {embeddings.OFFLINE_MODEL} (pass 2 of 2)",
    ], labels


def test_a_hosted_model_alone_has_no_pass_number(monkeypatch):
    labels = []
    real = backfill.Progress
    monkeypatch.setattr(
        backfill, "Progress", lambda label, total, **kw: labels.append(label) or real(label, total, **kw)
    )
    monkeypatch.setattr(backfill, "query", lambda name: name)
    batches = [5]
    monkeypatch.setattr(backfill, "_embed_batch", lambda *args: batches.pop() if batches else 0)
    backfill.embed_every_leg(_Counts(), {"embedding": "openai/text-embedding-3-small"}, quiet=True)
    assert labels == ["embedding with openai/text-embedding-3-small"], labels
