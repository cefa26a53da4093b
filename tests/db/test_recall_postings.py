"""The lexical recall takes its candidates from the impact-ordered postings, and on the
bench's own question set (the demo corpus and its template questions, pinned to their project, as
`make bench SIZE=layers` asks them) it ranks exactly as ranking every match of the layer did."""

from __future__ import annotations

import json

from zm_roi.identity import act_as, claims_for
from zm_roi.importer import MemoryLine, Target, insert_memories
from zm_roi.localdb import project_root

# Today's ranking before the postings: every live match of the pinned project and the caller's personal
# layer ranked by ts_rank (title weighted like the body), best 10.
EVERY_MATCH = """
select m.id, ts_rank('{0.1, 0.2, 0.4, 0.4}', m.search, public.recall_query(%(question)s), 1)::real as score
from public.memories m
where m.invalidated_at is null and m.search @@ public.recall_query(%(question)s)
  and ((m.scope = 'project' and m.project_id = %(project_id)s) or (m.scope = 'personal' and m.author_id = auth.uid()))
order by score desc, m.created_at desc, m.id
limit 10"""


def test_the_postings_rank_the_bench_questions_as_ranking_every_match_did(conn, email):
    demo = project_root() / "python" / "zm_roi" / "data" / "demo_corpus.jsonl"
    rows = [json.loads(line) for line in demo.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = [MemoryLine(kind=r["kind"], title=r["title"], body=r["body"]) for r in rows]
    insert_memories(conn, lines, Target(email, project="postings-demo"))
    project_id = conn.execute("select id from public.projects where name = 'postings-demo'").fetchone()[0]
    user_id = conn.execute("select id from auth.users where email = %s", (email,)).fetchone()[0]
    questions = [
        q
        for (q,) in conn.execute(
            "select roi.template_question(kind, title, body) from public.memories where project_id = %s",
            (project_id,),
        ).fetchall()
        if q is not None
    ]
    assert len(questions) > 100
    act_as(conn, claims_for(user_id, email))
    differ = []
    for question in questions:
        args = {"question": question, "project_id": project_id}
        now = conn.execute(
            "select memory_id, score from public.recall_lexical(%(question)s, %(project_id)s)", args
        ).fetchall()
        before = conn.execute(EVERY_MATCH, args).fetchall()
        if now != before:
            differ.append(question)
    assert differ == [], f"{len(differ)} of {len(questions)} questions rank differently, e.g. {differ[:3]}"


def test_the_postings_of_a_copy_are_written_by_one_copy_statement(conn, email):
    """An import's COPY (the bench's and `zm-roi import`'s bulk path) posts every row it writes."""
    insert_memories(conn, [MemoryLine(kind="decision", title="seed", body="seed")], Target(email, project="p-copy"))
    project_id, user_id = conn.execute(
        "select p.id, u.id from public.projects p, auth.users u where p.name = 'p-copy' and u.email = %s", (email,)
    ).fetchone()
    with conn.cursor().copy(
        "copy public.memories (author_id, project_id, kind, title, body, scope) from stdin"
    ) as copy:
        for i in range(50):
            copy.write_row((user_id, project_id, "gotcha", f"Copied note {i}", f"The quokka {i} rule.", "project"))
    posted = conn.execute(
        """select count(distinct p.memory_id) from public.memory_postings p
           where p.layer_id = %s and p.lexeme = 'quokka'""",
        (project_id,),
    ).fetchone()[0]
    assert posted == 50


def _ranks_as_every_match(conn, email, project: str, lines: list[MemoryLine], question: str) -> None:
    insert_memories(conn, lines, Target(email, project=project))
    project_id, user_id = conn.execute(
        "select p.id, u.id from public.projects p, auth.users u where p.name = %s and u.email = %s", (project, email)
    ).fetchone()
    act_as(conn, claims_for(user_id, email))
    args = {"question": question, "project_id": project_id}
    now = conn.execute("select memory_id, score from public.recall_lexical(%(question)s, %(project_id)s)", args)
    before = conn.execute(EVERY_MATCH, args).fetchall()
    assert before, "the question matches nothing: the test would prove nothing"
    assert now.fetchall() == before


def test_ties_beyond_the_last_kept_are_ranked_by_recency_as_every_match_is(conn, email):
    """Fifteen memories score alike: which ten are kept is decided by ts_rank's tie-break (newest first),
    not by the order their summed impacts came in. Fails if only the ten best sums are ranked again."""
    lines = [MemoryLine(kind="gotcha", title=f"Tie {i}", body="The walrus cache expires nightly.") for i in range(15)]
    _ranks_as_every_match(conn, email, "postings-ties", lines, "When does the walrus cache expire?")


def test_a_cut_list_sends_the_question_to_the_pool_of_candidates(conn, email):
    """2,101 memories hold "walrus": its list is cut at 1,500 postings, and the one memory that also holds
    "quokka" is the longest, so its walrus posting is the one left out. Its quokka impact alone is below
    the tenth-best walrus sum but within the best 500, and ts_rank ranks it first: found only where the
    leg sees that a list was cut and re-ranks the pool. Fails if the cut goes unnoticed."""
    lines = [
        MemoryLine(
            kind="gotcha", title=f"Cache note {i}", body="The walrus cache expires nightly." + " filler" * (i % 50)
        )
        for i in range(1, 2101)
    ]
    odd = MemoryLine(
        kind="gotcha", title="Odd one", body="The walrus cache expires nightly." + " quokka" * 8 + " filler" * 60
    )
    _ranks_as_every_match(conn, email, "postings-cut", [*lines, odd], "walrus quokka")
    posted = conn.execute(
        """select count(*) from public.memory_postings p join public.projects j on j.id = p.layer_id
           where j.name = 'postings-cut' and p.lexeme = 'walrus'"""
    ).fetchone()[0]
    assert posted > 1500, "the walrus list is not cut: the test would not reach the pool"
    pinned = "(select id from public.projects where name = 'postings-cut')"
    first = conn.execute(f"select title from public.recall_lexical('walrus quokka', {pinned})").fetchone()[0]
    assert first == "Odd one"


def test_a_pin_on_someone_elses_project_resolves_to_no_layer(conn, email):
    """Recall's layers are the caller's own memberships the pin names, so pinning another tenant's
    project reads none of its postings (its size cannot be timed through the lexical leg). Fails if
    roi.recall_layers takes the pin as given for a signed-in caller."""
    other = f"other-{email}"
    insert_memories(conn, [MemoryLine(kind="gotcha", title="mine", body="mine")], Target(email, project="layers-mine"))
    theirs_line = MemoryLine(kind="gotcha", title="theirs", body="theirs")
    insert_memories(conn, [theirs_line], Target(other, project="layers-theirs"))
    mine, theirs, user_id = conn.execute(
        """select (select id from public.projects where name = 'layers-mine'),
                  (select id from public.projects where name = 'layers-theirs'),
                  (select id from auth.users where email = %s)""",
        (email,),
    ).fetchone()
    act_as(conn, claims_for(user_id, email))
    layers = "select projects, teams from roi.recall_layers(%s, null, false)"
    assert conn.execute(layers, (theirs,)).fetchone() == ([], [])
    assert conn.execute(layers, (mine,)).fetchone() == ([mine], [])
    leg = "select count(*) from roi.recall_lexical_leg('theirs', %s, null, false, 10, 500)"
    assert conn.execute(leg, (theirs,)).fetchone()[0] == 0
