#!/usr/bin/env bash
# pgvector for the embedded PostgreSQL 15. Debian 12 packages none, so: a binary package where one
# is installable (postgresql-15-pgvector, e.g. from apt.postgresql.org), otherwise Debian trixie's
# own source package (pgvector 0.8.0) built against postgresql-server-dev-15 (about 10 s).
# The trixie source index is read through a PRIVATE apt source list and lists directory: the
# system's apt configuration is never edited. Idempotent: nothing happens once vector.control exists.
set -euo pipefail
PGVER=15
CONTROL=/usr/share/postgresql/$PGVER/extension/vector.control
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
[ -f "$CONTROL" ] && exit 0

if apt-cache policy postgresql-$PGVER-pgvector 2>/dev/null | grep -q 'Candidate: [0-9]'; then
  echo "installing pgvector (postgresql-$PGVER-pgvector)"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql-$PGVER-pgvector >/dev/null
  exit 0
fi

echo "building pgvector from Debian trixie's source package (about 10 s)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
  > "$work/sources.list"
# Everything apt writes goes under $work, so this runs without root; as root, apt's download sandbox
# user could not write into the private (mode 700) folder, so it downloads as root.
apt_opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=-"
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache")
[ "$(id -u)" = 0 ] && apt_opts+=(-o "APT::Sandbox::User=root")
apt-get "${apt_opts[@]}" update -qq
(cd "$work" && apt-get "${apt_opts[@]}" source -qq --download-only pgvector >/dev/null \
  && dpkg-source -x --no-check pgvector_*.dsc src >/dev/null)
make -s -C "$work/src" PG_CONFIG=/usr/lib/postgresql/$PGVER/bin/pg_config >/dev/null
$SUDO make -s -C "$work/src" PG_CONFIG=/usr/lib/postgresql/$PGVER/bin/pg_config install >/dev/null
test -f "$CONTROL"
echo "pgvector installed into $(dirname "$CONTROL")"
