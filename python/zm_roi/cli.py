"""The `zm-roi` command line. Each subcommand is a thin wrapper; errors print as one line."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from decimal import Decimal
from pathlib import Path
from typing import NoReturn

from zm_roi import inputs, localdb, settings
from zm_roi.errors import UserError, database_errors, url_from
from zm_roi.queries import query

DASHBOARD_PORT = 8787


def embedded_cluster(config: settings.Settings) -> localdb.Cluster:
    """The cluster in ZM_DB_HOME: at the port its postmaster really listens on when it runs, else ZM_DB_PORT."""
    home = config.db_home or localdb.project_root() / ".zm" / "db"
    cluster = localdb.Cluster(home=home, port=config.db_port)
    running = cluster.running_port()
    if running is not None:
        cluster.port = running
    return cluster


def database_url(config: settings.Settings) -> str:
    """ZM_DB_URL when set, otherwise the embedded cluster's superuser URL (if it runs: whatever else
    listens on ZM_DB_PORT is not ours to write to)."""
    return config.db_url or running_cluster(config).url()


def running_cluster(config: settings.Settings) -> localdb.Cluster:
    """The embedded cluster, refused with what to run when it is absent or stopped, and refused when the
    server on its port is not the one started from ZM_DB_HOME: every command that hands out or uses the
    embedded database's URL comes here, so none reaches whatever else listens on the port."""
    cluster = embedded_cluster(config)
    if not cluster.exists():
        raise UserError(f"there is no embedded database in {cluster.home} yet: run `zm-roi db up`")
    if cluster.running_port() is None:
        raise UserError(f"the embedded database in {cluster.home} is not running: run `zm-roi db up`")
    if not cluster.serves_this_folder():
        raise UserError(
            f"the server on 127.0.0.1:{cluster.port} is not the database in {cluster.home} (its postmaster.pid "
            "is stale): stop that server or set ZM_DB_HOME to its folder, then run `zm-roi db up`"
        )
    return cluster


def db_up(config: settings.Settings, quiet: bool = False, keep_mode: bool = False) -> localdb.Cluster:
    """Create, start and migrate the embedded database; a second call changes nothing, and a call while
    another runs waits for it. With `keep_mode` (the demo) ZM_EXTRACTOR applies to a new database only."""
    say = (lambda *_: None) if quiet else (lambda text: print(text, flush=True))
    home = embedded_cluster(config)
    with home.exclusive(lambda: say(f"waiting for another `zm-roi db up` on {home.home} to finish")):
        return _db_up_locked(config, say, keep_mode)


def _db_up_locked(config: settings.Settings, say, keep_mode: bool) -> localdb.Cluster:
    # Read again under the lock: the call we waited for may have created and started it.
    cluster = embedded_cluster(config)
    root = localdb.project_root()
    created = not cluster.exists()
    if created:
        say(f"creating the embedded database in {cluster.home}")
        cluster.create()
    settings_changed = not created and cluster.update_settings()
    if not cluster.is_running():
        say(f"starting PostgreSQL 15 on 127.0.0.1:{cluster.port}")
        cluster.start()
    else:
        stale = cluster.stale_server()
        if stale:
            say(f"restarting PostgreSQL: it runs {stale[0]} but {stale[1]} is installed (the data is kept)")
            cluster.restart()
        elif settings_changed:
            say("restarting PostgreSQL to apply the new server settings (the data is kept)")
            cluster.restart()
    say("applying the compatibility layer and migrations (supabase db push)")
    fresh = not localdb.has_benchmark_schema(cluster.url())
    localdb.prepare_database(cluster, root, say=say)
    # The mode is the user's: set on a new database (EMBEDDED_FIRST_MODE unless ZM_EXTRACTOR says
    # otherwise) or when ZM_EXTRACTOR is given; otherwise whatever `zm-roi configure` last wrote stays.
    if fresh or (config.extractor and not keep_mode):
        localdb.set_extractor(cluster.url(), config.extractor or localdb.EMBEDDED_FIRST_MODE)
    say(f"ready: {cluster.url()} (extractor: {localdb.get_extractor(cluster.url())})")
    return cluster


def confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def cmd_db(args: argparse.Namespace, config: settings.Settings) -> None:
    cluster = embedded_cluster(config)
    if args.action == "up":
        db_up(config)
    elif args.action == "down":
        if not cluster.is_running():
            print(f"not running: {cluster.home}")
            return
        running_cluster(config)  # a stale postmaster.pid names someone else's process: not ours to stop
        cluster.stop()
        print(f"stopped the embedded database on 127.0.0.1:{cluster.port}")
    elif args.action == "url":
        print(running_cluster(config).url())
    elif args.action == "status":
        db_status(cluster)
    elif args.action == "reset":
        if not args.yes and not confirm(f"delete every memory and result in {cluster.home}?"):
            raise UserError("reset cancelled (pass --yes to skip the question)")
        with cluster.exclusive(lambda: print(f"waiting for another `zm-roi db up` on {cluster.home} to finish")):
            cluster.destroy(keep_lock=True)
            print(f"removed the database in {cluster.home}")
            _db_up_locked(config, lambda text: print(text, flush=True), keep_mode=False)


def db_status(cluster: localdb.Cluster) -> None:
    """Where the cluster is, what it runs, and how the last scheduled upkeep went."""
    if not cluster.is_running():
        state = "created, stopped" if cluster.exists() else "absent"
        print(f"{state}: {cluster.home}")
        return
    print(f"running: {cluster.home} on 127.0.0.1:{cluster.port} (PostgreSQL {cluster.server_version()})")
    if stale := cluster.stale_server():
        print(f"stale: PostgreSQL {stale[1]} is installed since it started; run `zm-roi db up` to restart it")
    print(f"upkeep: {localdb.upkeep_report(cluster.url())}")


def cmd_model(args: argparse.Namespace, config: settings.Settings) -> None:
    """The local model server (localmodel.py): up, down, its URL, the variables that point the worker at it."""
    from zm_roi import localmodel

    if args.action == "up":
        localmodel.start(say=lambda text: print(text, flush=True))
        print('point the worker and judge-check at it: eval "$(zm-roi model env)"')
    elif args.action == "down":
        localmodel.stop()
    elif args.action == "url":
        print(localmodel.running().url)
    elif args.action == "env":
        for name, value in localmodel.running().env().items():
            print(f"export {name}={value}")
    elif args.action == "status":
        server = localmodel.recorded(localmodel.home_folder())
        if server is None:
            print(f"not running: {localmodel.home_folder()}")
        else:
            state = "answering" if localmodel.answers(server.url) else "not answering yet"
            print(
                f"running: {server.model} at {server.url} (pid {server.pid}, "
                f"context {server.context_tokens} tokens, {state})"
            )


def cmd_configure(args: argparse.Namespace, config: settings.Settings) -> None:
    """With --extractor, --recall-function or a cap, write that; bare, print every setting it writes and
    change nothing."""
    url = database_url(config)
    caps = args.max_run_cost_usd is not None or args.max_owner_cost_usd_per_month is not None
    bare = not (args.extractor or args.recall_function or caps)
    if args.recall_function:
        print(f"recall function: {localdb.set_recall_function(url, args.recall_function)}")
    if args.extractor:
        localdb.set_extractor(url, args.extractor)
    if args.extractor or bare:
        print(f"extractor: {localdb.get_extractor(url)}")
    if bare:
        print(f"recall function: {localdb.get_recall_function(url)}")
    if caps:
        localdb.set_spending_caps(url, args.max_run_cost_usd, args.max_owner_cost_usd_per_month)
    if caps or bare:
        run_cap, owner_cap = localdb.get_spending_caps(url)
        print(f"max run cost: {dollars(run_cap)}")
        print(f"max owner cost per month: {dollars(owner_cap)}")


def dollars(value: Decimal | None) -> str:
    return "none" if value is None else f"${value} (by litellm's local price map)"


def cmd_import(args: argparse.Namespace, config: settings.Settings) -> None:
    from zm_roi import embeddings
    from zm_roi.importer import Target, import_memories

    target = Target(email=args.user, project=args.project, team=args.team, join=args.join)
    try:
        result = import_memories(database_url(config), Path(args.file), target, quiet=args.quiet)
    except KeyboardInterrupt:
        print("zm-roi: what was written is kept; run the same import again to finish it", file=sys.stderr)
        raise
    for note in result.notes:
        print(note)
    where = (
        f"project {args.project}"
        if args.project is not None
        else f"team {args.team}"
        if args.team is not None
        else "personal layer"
    )
    already = "memory was" if result.skipped == 1 else "memories were"
    skipped = f" ({result.skipped} identical {already} already there: skipped)" if result.skipped else ""
    print(f"imported {result.imported} memories for {args.user} into {where}{skipped}")
    if result.embedded:
        print(f"embedded {result.embedded} memories with {' and '.join(embeddings.configured_models().values())}")


def cmd_recall(args: argparse.Namespace, config: settings.Settings) -> None:
    from zm_roi.recall import print_recall

    # Hints (vectors of another model) go to stderr, so the hits printed survive a pipe.
    notes: list[str] = []
    if args.json:
        import json

        from zm_roi.recall import recall_hits

        hits = recall_hits(database_url(config), args.question, args.user, args.project, args.limit, args.team, notes)
        print(json.dumps(hits, indent=2, ensure_ascii=False))
    else:
        print_recall(database_url(config), args.question, args.user, args.project, args.limit, args.team, notes)
    for note in notes:
        print(f"zm-roi: {note}", file=sys.stderr)


def embedder_database_url(config: settings.Settings) -> str:
    """ZM_EMBEDDER_DB_URL when set; else ZM_DB_URL; else the embedded cluster as roi_embedder."""
    if config.embedder_db_url:
        url_from("ZM_EMBEDDER_DB_URL")
        return config.embedder_db_url
    if config.db_url:
        return config.db_url
    return running_cluster(config).url(user="roi_embedder", password=localdb.EMBEDDER_PASSWORD)


def cmd_embed(args: argparse.Namespace, config: settings.Settings) -> None:
    from zm_roi import embeddings
    from zm_roi.backfill import backfill

    url = embedder_database_url(config)
    models = embeddings.configured_models()
    if not models:
        raise UserError("embeddings are off (ZM_EMBEDDING_MODEL=none): nothing to embed")
    done = backfill(url, models, quiet=args.quiet)
    print(
        f"embedded {done.memories} memories with {' and '.join(models.values())}; "
        f"{done.questions_queued} probe questions queued for `zm-roi worker` to embed"
    )


def worker_database_url(config: settings.Settings) -> str:
    """ZM_WORKER_DB_URL when set, otherwise the embedded cluster as the least-privilege worker role."""
    if config.worker_db_url:
        url_from("ZM_WORKER_DB_URL")
    return config.worker_db_url or running_cluster(config).url(user="roi_worker", password=localdb.WORKER_PASSWORD)


def cmd_worker(args: argparse.Namespace, config: settings.Settings) -> None:
    import logging

    from zm_roi.llm import Endpoint
    from zm_roi.worker import WorkerConfig, run_worker

    # One line per row from us; litellm's own chatter only when it warns.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s zm-roi worker: %(message)s", stream=sys.stderr)
    logging.getLogger("zm_roi").setLevel(logging.INFO)
    worker_config = WorkerConfig(
        generation_model=config.generation_model,
        judge_model=config.judge_model,
        key_encryption_key=config.key_encryption_key,
        poll_seconds=config.worker_poll_seconds,
        concurrency=config.worker_concurrency,
        endpoint=Endpoint(config.model_context_tokens, config.model_schema),
    )
    url = worker_database_url(config)
    worker = run_worker(url, worker_config, once=args.once)
    if worker.failed and not worker.succeeded:
        # A row that failed for the last time is given up on (a judgment recorded as skipped, a probe
        # retired, a spot-check dropped) and leaves the queue: only what is still queued is retried.
        with localdb.connect(url) as conn:
            queued = conn.execute(query("worker_queue_state")).fetchone()[1]
        failed = f"every row failed ({worker.failed} of {worker.handled})"
        if queued:
            raise UserError(f"{failed}; {queued} still queued will be retried: see the reasons above")
        raise UserError(
            f"{failed} and none is queued again: each was given up on (a judgment recorded as skipped, "
            "a probe retired, a spot-check dropped); see the reasons above"
        )


def cmd_judge_check(args: argparse.Namespace, config: settings.Settings) -> int:
    """Exit 0 when the judge meets the thresholds of docs/judge-calibration.md, 1 when it does not, 2 (a
    UserError) when no call came back, so there is nothing to judge the model by."""
    import json

    from zm_roi import judgecheck, llm

    model = args.model or config.judge_model
    llm.check_keys([model])
    report = judgecheck.run_check(
        database_url(config),
        model,
        config.operator_email,
        timeout=config.model_timeout_seconds,
        concurrency=config.worker_concurrency,
        record=args.record,
        endpoint=llm.Endpoint(config.model_context_tokens, config.model_schema),
        progress=True,  # on stderr: stdout stays the report (one JSON object with --json)
    )
    if report["cases"] and not report["calls"]:
        # No call came back at all (the server is down, the URL or key is wrong, every prompt too long):
        # nothing was measured, so there is no verdict on the model.
        raise UserError(
            f"judge-check could not measure {model}: none of the {report['cases']} cases got a reply "
            f"({report['last_failure']}); check OPENAI_API_BASE, the key and the server, then run it again"
        )
    print(json.dumps(report, indent=2) if args.json else judgecheck.format_report(report))
    return 0 if report["verdict"]["passed"] else 1


def cmd_set_key(args: argparse.Namespace, config: settings.Settings) -> None:
    from zm_roi.keys import read_key, store_key

    api_key = read_key(f"{args.provider} API key for {args.user}: ")
    store_key(database_url(config), args.user, args.provider, api_key, config.key_encryption_key)
    print(f"stored {args.user}'s own {args.provider} key (encrypted); the worker uses it for their calls")


def cmd_demo(args: argparse.Namespace, config: settings.Settings) -> None:
    from zm_roi.demo import run_demo

    run_demo(config, db_up)


def make_transport(config: settings.Settings):
    """The transport settings select: Supabase, ZM_DB_URL or the embedded database (which must run)."""
    from zm_roi import transport

    if not (config.db_url or config.supabase_url or config.supabase_anon_key):
        running_cluster(config)
    return transport.from_settings(config, embedded_cluster(config))


def cmd_schedule(args: argparse.Namespace, config: settings.Settings) -> None:
    """Record the user's wish for a routine run (pg_cron's upkeep starts it, as the user): with --user
    on the local database as that user, otherwise as ZM_ACCESS_TOKEN's user through the transport."""
    if args.user:
        from zm_roi.schedule import schedule_as

        answer = schedule_as(database_url(config), args.user, args.frequency)
    else:
        answer = make_transport(config).benchmark_schedule(args.frequency)
    if answer["frequency"] == "off":
        print("schedule: off (no routine run; benchmark_memory still runs on demand)")
    else:
        print(
            f"schedule: {answer['frequency']}; one run per period at most, never on top of one in progress; "
            f"the next one after {answer['next_run_after']}"
        )


def local_token(config: settings.Settings, email: str, ttl: int) -> tuple[str, str, str]:
    """An access token for a user of the local database (embedded or ZM_DB_URL), signed with its JWT
    secret, as Supabase Auth would sign one: (database URL, JWT secret, token)."""
    from zm_roi import tokens, transport

    email = inputs.email(email)
    if not config.db_url:
        running_cluster(config)
    db_url, jwt_secret = transport.local_database(config, embedded_cluster(config))
    with localdb.connect(db_url) as conn:
        row = conn.execute(query("user_id_by_email"), {"email": email}).fetchone()
    if row is None:
        raise UserError(f"no user {email}: import memories for them first")
    return db_url, jwt_secret, tokens.mint(jwt_secret, row[0], email, ttl)


def cmd_token(args: argparse.Namespace, config: settings.Settings) -> None:
    print(local_token(config, args.user, args.ttl)[2])


def cmd_gate(args: argparse.Namespace, config: settings.Settings) -> int:
    import json

    from zm_roi import gate, transport

    if args.alpha is not None and not args.no_regression:
        raise UserError("--alpha sets the significance of --no-regression: give --no-regression too")
    rules = gate.Rules(
        min_rate=args.min_rate,
        no_regression=args.no_regression,
        alpha=gate.DEFAULT_ALPHA if args.alpha is None else args.alpha,
    ).check()
    if args.user:
        # The same user as every other command's --user, through the same door as the token path:
        # a token minted for them, verified, and the calls made as them under RLS.
        if config.supabase_url or config.supabase_anon_key:
            raise UserError("--user works with the local database only: against Supabase, set ZM_ACCESS_TOKEN")
        db_url, jwt_secret, token = local_token(config, args.user, int(args.timeout) + 600)
        as_user = transport.LocalTransport(db_url, jwt_secret, token)
    else:
        as_user = make_transport(config)

    def say(text: str) -> None:
        print(f"zm-roi gate: {text}", file=sys.stderr, flush=True)

    outcome = gate.run_gate(as_user, rules, timeout=args.timeout, say=say)
    if args.json:
        print(json.dumps(outcome.as_json(), indent=2))
    elif args.markdown:
        print(gate.markdown_report(outcome))
    else:
        print(gate.text_report(outcome))
    return outcome.decision.code


def cmd_mcp(args: argparse.Namespace, config: settings.Settings) -> None:
    from zm_roi.mcp_server import serve

    # Settings are read again per call, so a bad token or a database that is not up yet is a tool
    # error the agent can relay, not a server that refuses to start.
    serve(lambda: make_transport(settings.load()))


def cmd_dashboard(args: argparse.Namespace, config: settings.Settings) -> None:
    from zm_roi import dashboard

    if args.out is not None:
        path = Path(args.out)
        if path.is_dir():
            raise UserError(f"{path} is a folder: --out needs a file name")
        if not path.parent.is_dir():
            raise UserError(f"cannot write {path}: the folder {path.parent} does not exist")
        dashboard.write_page(path, dashboard.render(make_transport(config)))
        print(f"wrote {path}")
    else:
        dashboard.serve(lambda: make_transport(settings.load()), args.serve)


class Parser(argparse.ArgumentParser):
    """argparse, saying a refused command line as every other failure is said: one line on stderr that
    names the fix, exit 2 (argparse's own prints the usage and a second line)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"zm-roi: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="zm-roi", description="The memory ROI benchmark.")
    sub = parser.add_subparsers(dest="command", required=True)

    db = sub.add_parser("db", help="the embedded local Supabase-compatible PostgreSQL")
    db.add_argument("action", choices=["up", "down", "url", "status", "reset"])
    db.add_argument("--yes", action="store_true", help="reset without asking")
    db.set_defaults(func=cmd_db)

    model = sub.add_parser(
        "model", help="a local OpenAI-compatible model server with the packaged model (the `local-model` extra)"
    )
    model.add_argument("action", choices=["up", "down", "url", "env", "status"])
    model.set_defaults(func=cmd_model)

    configure = sub.add_parser(
        "configure", help="write settings (extractor, recall function, spending caps) into the database"
    )
    configure.add_argument(
        "--extractor", choices=list(settings.EXTRACTORS), help="write this mode (without it: print the settings)"
    )
    configure.add_argument(
        "--recall-function",
        metavar="SCHEMA.NAME",
        help="the recall the benchmark calls (default public.recall); same signature, SECURITY INVOKER",
    )
    configure.add_argument(
        "--max-run-cost-usd",
        type=inputs.cap_usd("--max-run-cost-usd", localdb.CLEAR),
        metavar="USD",
        help="no run spends more than this on the deployment's key (`none`: no cap)",
    )
    configure.add_argument(
        "--max-owner-cost-usd-per-month",
        type=inputs.cap_usd("--max-owner-cost-usd-per-month", localdb.CLEAR),
        metavar="USD",
        help="no user's calls cost more than this in a calendar month (UTC), own key included (`none`: no cap)",
    )
    configure.set_defaults(func=cmd_configure)

    imp = sub.add_parser("import", help="load memories from a JSONL file for one user")
    imp.add_argument("file")
    imp.add_argument("--user", required=True, metavar="EMAIL")
    where = imp.add_mutually_exclusive_group()
    where.add_argument("--project", metavar="NAME")
    where.add_argument("--team", metavar="NAME")
    imp.add_argument(
        "--join",
        action="store_true",
        help="make the user a member of the existing project or team (they then see its memories)",
    )
    imp.add_argument("--quiet", action="store_true", help="no progress line (the summary still prints)")
    imp.set_defaults(func=cmd_import)

    recall = sub.add_parser("recall", help="recall memories for a question as a user would")
    recall.add_argument("question")
    recall.add_argument("--user", required=True, metavar="EMAIL")
    pinned = recall.add_mutually_exclusive_group()
    pinned.add_argument("--project", metavar="NAME", help="pin to this project plus the user's personal layer")
    pinned.add_argument("--team", metavar="NAME", help="pin to this team plus the user's personal layer")
    recall.add_argument(
        "--limit", type=inputs.bounded_int(1, 100, "a number of memories"), default=5, help="1 to 100 (default: 5)"
    )
    recall.add_argument("--json", action="store_true", help="print the hits as a JSON array")
    recall.set_defaults(func=cmd_recall)

    schedule = sub.add_parser("schedule", help="run the benchmark routinely for a user (pg_cron starts it, as them)")
    often = schedule.add_mutually_exclusive_group(required=True)
    often.add_argument("--daily", dest="frequency", action="store_const", const="daily", help="one run a day")
    often.add_argument("--weekly", dest="frequency", action="store_const", const="weekly", help="one run a week")
    often.add_argument("--off", dest="frequency", action="store_const", const="off", help="no routine run")
    schedule.add_argument("--user", metavar="EMAIL", help="as this user of the local database (else ZM_ACCESS_TOKEN's)")
    schedule.set_defaults(func=cmd_schedule)

    embed = sub.add_parser("embed", help="embed memories and probe questions that have no embedding yet")
    embed.add_argument("--quiet", action="store_true", help="no progress line (the summary still prints)")
    embed.set_defaults(func=cmd_embed)

    token = sub.add_parser("token", help="mint a local access token for a user of the embedded database")
    token.add_argument("--user", required=True, metavar="EMAIL")
    token.add_argument(
        "--ttl",
        type=inputs.bounded_int(1, 366 * 24 * 3600, "a lifetime in seconds"),
        default=3600,
        metavar="SECONDS",
        help="lifetime (default: 3600, at most a year)",
    )
    token.set_defaults(func=cmd_token)

    mcp = sub.add_parser("mcp", help="the MCP server (stdio) exposing benchmark_memory, as ZM_ACCESS_TOKEN's user")
    mcp.set_defaults(func=cmd_mcp)

    dash = sub.add_parser("dashboard", help='the "Only memory knows" tile as ZM_ACCESS_TOKEN\'s user')
    where_to = dash.add_mutually_exclusive_group(required=True)
    where_to.add_argument("--out", metavar="FILE", help="write the page to FILE")
    where_to.add_argument(
        "--serve",
        nargs="?",
        type=inputs.bounded_int(0, 65535, "a port"),
        const=DASHBOARD_PORT,
        metavar="PORT",
        help=f"serve it on 127.0.0.1 (default port {DASHBOARD_PORT})",
    )
    dash.set_defaults(func=cmd_dashboard)

    gate_cmd = sub.add_parser(
        "gate",
        help="run the benchmark as a CI check: exit 0 held, 1 failed, 2 could not measure or not comparable",
        description=(
            "Start a run as the user, wait for its verdicts and decide by the rules given (at least one). "
            "Exit 0: held. 1: failed. 2: could not measure (timeout, nothing judged, no knowledge, stopped by "
            "the spending cap), not comparable (the judge changed, no previous comparable run), or bad input."
        ),
    )
    gate_cmd.add_argument(
        "--min-rate",
        type=inputs.bounded_float(0, 1, "a rate"),
        metavar="R",
        help="fail when the exclusive rate's 95%% upper bound is below R (0 to 1)",
    )
    gate_cmd.add_argument(
        "--no-regression",
        action="store_true",
        help="fail when the paired comparison with the previous comparable run is a significant regression",
    )
    gate_cmd.add_argument(
        "--alpha",
        type=inputs.bounded_float(0, 1, "a significance level", open_interval=True),
        metavar="A",
        help="significance of --no-regression's sign test (default: 0.05)",
    )
    shown = gate_cmd.add_mutually_exclusive_group()
    shown.add_argument("--markdown", action="store_true", help="print a before/after table for a pull-request comment")
    shown.add_argument("--json", action="store_true", help="print the same as one JSON object")
    gate_cmd.add_argument(
        "--timeout",
        type=inputs.bounded_float(1, 86400, "a number of seconds"),
        default=900.0,
        metavar="S",
        help="give up waiting for the run after S seconds in all (default: 900), exit 2",
    )
    gate_cmd.add_argument(
        "--user", metavar="EMAIL", help="as this user of the local database (default: ZM_ACCESS_TOKEN's user)"
    )
    gate_cmd.set_defaults(func=cmd_gate)

    worker = sub.add_parser("worker", help="write probe questions and judge recalls with a model (LLM mode)")
    worker.add_argument("--once", action="store_true", help="drain what is queued now, then exit")
    worker.set_defaults(func=cmd_worker)

    check = sub.add_parser(
        "judge-check",
        help="put the judge prompt to a model on the shipped calibration set: sensitivity, specificity, "
        "kappa, decoys, a verdict (exit 1 below the thresholds)",
    )
    check.add_argument("--model", metavar="M", help="the litellm model to check (default: ZM_JUDGE_MODEL)")
    check.add_argument("--json", action="store_true", help="print the report as one JSON object")
    check.add_argument(
        "--record",
        action="store_true",
        help="store the counts as this judge's calibration: the runs it judged get a corrected rate",
    )
    check.set_defaults(func=cmd_judge_check)

    set_key = sub.add_parser("set-key", help="store a user's own provider key (read from standard input)")
    set_key.add_argument("--user", required=True, metavar="EMAIL")
    set_key.add_argument("--provider", default="openai", help="litellm provider name (default: openai)")
    set_key.set_defaults(func=cmd_set_key)

    demo = sub.add_parser("demo", help="the whole cycle end to end on the embedded database")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Every connection this process (and the tools it starts) opens gives up instead of hanging on a
    # peer that accepts and never answers; libpq and psycopg both read it. The user's own value wins.
    os.environ.setdefault("PGCONNECT_TIMEOUT", str(localdb.CONNECT_TIMEOUT))
    try:
        inputs.clean(args)  # every text option trimmed, normalised and length-checked, in one place
        config = settings.load()
        with database_errors():
            code = args.func(args, config)
        sys.stdout.flush()  # a closed pipe is met here, inside the handlers, not at interpreter exit
    except BrokenPipeError:
        # The reader went away (`zm-roi recall … | head -1`): it has what it wanted. End quietly, as a
        # Unix tool killed by SIGPIPE does; stdout goes to /dev/null so the exit's flush raises nothing.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except UserError as exc:
        print(f"zm-roi: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"zm-roi: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("zm-roi: interrupted", file=sys.stderr)
        return 130
    # A command that decides an exit status (the gate; judge-check below its thresholds) returns it.
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
