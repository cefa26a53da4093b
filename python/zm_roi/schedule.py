"""`zm-roi schedule --user EMAIL`: the user's wish for a routine run, written as that user on the local
database (the transport does the same for ZM_ACCESS_TOKEN's user). pg_cron's upkeep honours it."""

from __future__ import annotations

from zm_roi import inputs, localdb
from zm_roi.errors import UserError
from zm_roi.identity import act_as, claims_for
from zm_roi.queries import query


def schedule_as(db_url: str, email: str, frequency: str) -> dict:
    """public.benchmark_schedule(frequency) as the local user `email`, as a Data API call of theirs would."""
    email = inputs.email(email)
    with localdb.connect(db_url) as conn, conn.transaction():
        row = conn.execute(query("user_id_by_email"), {"email": email}).fetchone()
        if row is None:
            raise UserError(f"no user {email}: import memories for them first")
        act_as(conn, claims_for(row[0], email), "/rpc/benchmark_schedule")
        return conn.execute(query("benchmark_schedule"), {"frequency": frequency}).fetchone()[0]
