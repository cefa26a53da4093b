"""LLM mode on a real local model: `python -m zm_roi_bench.local_model` (bench/README.md).

It starts the local model server (`zm-roi model up`'s code: llama-cpp-python with the packaged
SmolLM2-135M-Instruct) and a throwaway cluster, then
1. runs `zm-roi judge-check --record` on the whole shipped calibration set through litellm's `openai/...`
   route with the server's context window and schema form, and
2. runs LLM mode end to end on the demo team (maya's pool of questions written by the model, a run judged
   by it, the judge checks on), timing every model call, and reads the tile, whose judge note says what
   the recorded calibration allows;
and writes both to bench/results/<date>-local-model.md and .json."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from zm_roi import demo, judgecheck, llm, localdb, localmodel
from zm_roi.identity import act_as, claims_for
from zm_roi.queries import query
from zm_roi.worker import Worker, WorkerConfig
from zm_roi_bench.cluster import machine, throwaway_cluster

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
MODEL = f"openai/{localmodel.MODEL_NAME}"
OPERATOR = "operator@zm-roi.invalid"
# Replies of a small model on 2 shared cores: a lease long enough that no call is cut short by it.
LEASE = "5 minutes"


class TimedCompletion:
    """litellm.completion, timing each call by what it was for (the prompt's template says)."""

    def __init__(self, api_base: str):
        self.api_base = api_base
        self.seconds: dict[str, list[float]] = {}
        self.lock = threading.Lock()

    def __call__(self, **kwargs):
        prompt = kwargs["messages"][0]["content"]
        purpose = "question" if prompt.startswith("You are writing one question") else "verdict"
        began = time.monotonic()
        try:
            return llm.litellm.completion(**{**kwargs, "api_base": self.api_base, "api_key": "local"})
        finally:
            with self.lock:
                self.seconds.setdefault(purpose, []).append(time.monotonic() - began)


def summary(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {
        "n": len(values),
        "mean_s": round(statistics.fmean(values), 2),
        "median_s": round(statistics.median(values), 2),
        "p90_s": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 2),
        "max_s": round(ordered[-1], 2),
        "total_s": round(sum(values), 1),
    }


def as_maya(db_url: str, name: str):
    with psycopg.connect(db_url) as conn, conn.transaction():
        user_id = conn.execute(query("user_id_by_email"), {"email": demo.DEMO_USER}).fetchone()[0]
        act_as(conn, claims_for(user_id, demo.DEMO_USER))
        return conn.execute(query(name)).fetchone()[0]


def end_to_end(
    db_url: str, worker_url: str, endpoint: llm.Endpoint, api_base: str, say, pool: int, minutes: float
) -> dict:
    """The demo team in LLM mode: questions written, a run judged (judge checks on), the tile read. Past
    `minutes` it stops waiting and says so in the report (a slow model on a loaded machine)."""
    demo.load_demo_team(db_url)
    localdb.set_extractor(db_url, "llm")
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("update roi.settings set lease_duration = %s::interval, pool_target = %s", (LEASE, pool))
    timed = TimedCompletion(api_base)
    config = WorkerConfig(generation_model=MODEL, judge_model=MODEL, concurrency=1, endpoint=endpoint)
    began = time.monotonic()
    deadline = began + 60 * minutes
    answers = []
    while time.monotonic() < deadline:
        answer = as_maya(db_url, "benchmark_memory")
        answers.append(answer["status"])
        if answer["status"] != "generating":
            break
        Worker(worker_url, config, timed).run(once=True)
        time.sleep(1)
    questions_done = time.monotonic()
    say(f"  pool written in {questions_done - began:.0f} s: {answer}")
    run_id = answer.get("run_id")
    while run_id and as_maya(db_url, "benchmark_tile")["state"] == "judging" and time.monotonic() < deadline:
        Worker(worker_url, config, timed).run(once=True)
        time.sleep(1)
    finished = time.monotonic()
    runs = [r for r in as_maya(db_url, "benchmark_runs") if r["run_id"] == run_id]
    with psycopg.connect(db_url) as conn:
        origins = dict(
            conn.execute(
                "select question_origin, count(*) from roi.probes p join auth.users u on u.id = p.owner_id "
                "where u.email = %s and question_origin is not null group by 1",
                (demo.DEMO_USER,),
            ).fetchall()
        )
    return {
        "stopped_at_deadline": time.monotonic() >= deadline,
        "answers": answers,
        "question_origins": origins,
        "pool_seconds": round(questions_done - began, 1),
        "judging_seconds": round(finished - questions_done, 1),
        "calls": {purpose: summary(values) for purpose, values in timed.seconds.items()},
        "run": runs[0] if runs else None,
        "tile": as_maya(db_url, "benchmark_tile"),
    }


def render(result: dict) -> str:
    check, e2e, m = result["judge_check"], result["end_to_end"], result["machine"]
    lines = [
        f"# LLM mode on a real local model ({result['date']})",
        "",
        f"Model: {result['model']['name']} ({result['model']['file']}), served by llama-cpp-python "
        f"{result['model']['runtime']} on 127.0.0.1 with a context of {result['model']['context_tokens']} tokens, "
        f"reached through litellm's `{MODEL}` route; schema form `{result['model']['schema_form']}` "
        "(the judgment's JSON schema, turned into a grammar by the server).",
        f"Machine: {m['cpu_model']}, {m['cores']} cores, {m['memory_gb']} GB, load {m['load_average_at_start']} "
        f"at start (the machine is shared). Embeddings: {result.get('embedding_model')} (recall is lexical).",
        f"Server start to first answer: {result['model']['load_seconds']} s.",
        "",
        _sample_note(result.get("calibration_sample")),
        "",
        "## judge-check on the shipped calibration set",
        "",
        "```",
        judgecheck.format_report(check),
        "```",
        "",
        "| label | sensitivity | specificity | Youden's J | accuracy | kappa |",
        "|---|---|---|---|---|---|",
    ]
    for label in judgecheck.LABELS:
        f = check[label]
        lines.append(
            f"| {label} | {_pct(f['sensitivity'])} | {_pct(f['specificity'])} | {f['youden']} | "
            f"{_pct(f['accuracy'])} | {f['kappa']} |"
        )
    decoys = "; ".join(
        f"{d['description']}: {d['false_positives']} of {d['n']} ({_pct(d['rate'])})" for d in check["decoys"].values()
    )
    lines += [
        "",
        f"Cases {check['cases']}, judged {check['judged']}, skipped {check['skipped']} "
        f"(unparseable share {_pct(check['skipped'] / check['cases'] if check['cases'] else None)}; "
        f"{check['unparseable_replies']} of {check['calls']} replies did not parse); decoys judged answered: "
        f"{decoys}; wall time {check['seconds']} s ({check['seconds'] / max(1, check['calls']):.2f} s a call).",
        f"Verdict: {'PASS' if check['verdict']['passed'] else 'FAIL'}"
        + ("" if check["verdict"]["passed"] else ": " + "; ".join(check["verdict"]["failures"])),
        "",
        "## LLM mode end to end (the demo team, maya's pool and one run)",
        "",
        ("Stopped waiting at the deadline (--minutes). " if e2e.get("stopped_at_deadline") else "")
        + f"Calls to the benchmark (one a second while the worker drains): {_answers(e2e['answers'])}. "
        f"Questions by origin: {e2e['question_origins']}; pool target {result.get('pool_target')}.",
        f"Pool written in {e2e['pool_seconds']} s; run judged (judgments and the judge checks) in "
        f"{e2e['judging_seconds']} s.",
        "",
        "| call | n | mean | median | p90 | max | total |",
        "|---|---|---|---|---|---|---|",
    ]
    for purpose, s in e2e["calls"].items():
        if s["n"]:
            lines.append(
                f"| {purpose} | {s['n']} | {s['mean_s']} s | {s['median_s']} s | {s['p90_s']} s | {s['max_s']} s | "
                f"{s['total_s']} s |"
            )
    run, tile = e2e["run"] or {}, e2e["tile"]
    lines += [
        "",
        f"Run: {run.get('probe_count')} probes, {run.get('judged_count')} judged, {run.get('skipped_count')} "
        f"skipped, exclusive rate {run.get('exclusive_rate')}, corrected {run.get('exclusive_rate_corrected')}; "
        f"withheld-source checks {run.get('withheld_checked')}, order checks {run.get('order_checked')} "
        f"({run.get('order_agreement_count')} agreed).",
        "",
        f'Tile: state `{tile["state"]}`, hint "{tile["hint"]}".',
        f'Judge note: "{tile["judge_note"]}".',
        "",
    ]
    return "\n".join(lines)


def _sample_note(sample: dict | None) -> str:
    if not sample or sample["every"] == 1:
        return "The whole calibration set."
    return (
        f"A sample of the calibration set: every {sample['every']}th case, {sample['cases']} of {sample['of']} "
        "(the whole set takes about 20 minutes here; `--every 1`)."
    )


def _answers(answers: list[str]) -> str:
    """`generating` 84 times, then `started`: each answer with how many times in a row it came."""
    runs: list[list] = []
    for answer in answers:
        if runs and runs[-1][0] == answer:
            runs[-1][1] += 1
        else:
            runs.append([answer, 1])
    return ", then ".join(f"`{a}`" + (f" {n} times" if n > 1 else "") for a, n in runs)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m zm_roi_bench.local_model")
    parser.add_argument("--cases", type=int, default=0, help="only the first N calibration cases (0: all)")
    parser.add_argument(
        "--every", type=int, default=1, help="every Nth calibration case (a sample spread over the set)"
    )
    parser.add_argument("--minutes", type=float, default=15, help="give the end-to-end run at most this long")
    parser.add_argument("--pool", type=int, default=20, help="maya's pool of questions (roi.settings.pool_target)")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--render", metavar="JSON", help="only write the .md again from a report's .json")
    args = parser.parse_args()
    if args.render:
        source = Path(args.render)
        source.with_suffix(".md").write_text(render(json.loads(source.read_text())))
        return

    def say(text: str) -> None:
        print(text, flush=True)

    import llama_cpp

    # Recall is lexical here (no memory or question embeddings): the model calls are what is measured, and
    # embedding the demo corpus on 2 shared cores would only add minutes before the first call.
    os.environ.setdefault("ZM_EMBEDDING_MODEL", "none")
    result: dict = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "embedding_model": os.environ["ZM_EMBEDDING_MODEL"],
    }
    home = Path(tempfile.mkdtemp(prefix="zm-roi-model-"))
    began = time.monotonic()
    server = localmodel.start(home, say=say)
    result["model"] = {
        "name": localmodel.MODEL_NAME,
        "file": localmodel.model_file().name,
        "runtime": llama_cpp.__version__,
        "context_tokens": server.context_tokens,
        "schema_form": "json_object",
        "load_seconds": round(time.monotonic() - began, 1),
    }
    endpoint = llm.Endpoint(context_tokens=server.context_tokens, schema_form="json_object")
    try:
        with throwaway_cluster(ROOT, say=say) as cluster:
            db_url = cluster.url()
            cases = judgecheck.load_cases()
            cases = cases[: args.cases] if args.cases else cases
            cases = cases[:: args.every]
            result["calibration_sample"] = {
                "every": args.every,
                "cases": len(cases),
                "of": len(judgecheck.load_cases()),
            }

            def complete(**kwargs):
                return llm.litellm.completion(**{**kwargs, "api_base": server.url, "api_key": "local"})

            say(f"judge-check --record on {len(cases)} cases")
            report = judgecheck.run_check(
                db_url,
                MODEL,
                OPERATOR,
                complete=complete,
                timeout=300,
                concurrency=args.concurrency,
                cases=cases,
                record=True,
                endpoint=endpoint,
                progress=True,
            )
            say(judgecheck.format_report(report))
            result["judge_check"] = report
            say("LLM mode end to end on the demo team")
            worker_url = cluster.url(user="roi_worker", password=localdb.WORKER_PASSWORD)
            e2e = end_to_end(db_url, worker_url, endpoint, server.url, say, args.pool, args.minutes)
            result["end_to_end"] = e2e
            # The run's figures again, now that its judge has a recorded calibration.
            e2e["run"] = next(
                (r for r in as_maya(db_url, "benchmark_runs") if e2e["run"] and r["run_id"] == e2e["run"]["run_id"]),
                e2e["run"],
            )
            e2e["tile"] = as_maya(db_url, "benchmark_tile")
    finally:
        with contextlib.suppress(Exception):
            localmodel.stop(home, say=say)
    stem = f"{result['date']}-local-model" + (f"-{args.cases}" if args.cases else "")
    result["pool_target"] = args.pool
    RESULTS.mkdir(exist_ok=True)
    # The raw figures first: a report can be rendered again from them (--render).
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (RESULTS / f"{stem}.md").write_text(render(json.loads((RESULTS / f"{stem}.json").read_text())))
    say(f"wrote bench/results/{stem}.md and .json")


if __name__ == "__main__":
    main()
