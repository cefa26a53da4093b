#!/usr/bin/env bash
# pgvector for the embedded PostgreSQL 15. Debian 12 packages none, so: a binary package where one
# is installable (postgresql-15-pgvector, e.g. from apt.postgresql.org), otherwise Debian trixie's
# own source package (pgvector 0.8.0) built against postgresql-server-dev-15 (about 10 s).
# The trixie source index is read through a PRIVATE apt source list and lists directory: the
# system's apt configuration is never edited. The archive address (and its keyring) come from the
# machine's own apt sources, so a mirror or proxy configured there is the one used.
# Idempotent: nothing happens once vector.control exists.
# `install-pgvector.sh --print-source` prints the source line it would use and exits (APT_ETC
# points it at another apt configuration folder, for tests).
set -euo pipefail
PGVER=15
CONTROL=/usr/share/postgresql/$PGVER/extension/vector.control
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
APT_ETC=${APT_ETC:-/etc/apt}

# "URI KEYRING" of the first Debian archive (not debian-security) in the apt sources: deb822
# stanzas in sources.list.d/*.sources first (Debian 12's default), then one-line `deb` entries.
debian_archive() {
  local uri="" keyring="" line key value
  for file in "$APT_ETC"/sources.list.d/*.sources; do
    [ -f "$file" ] || continue
    # Stanzas are separated by blank lines; a stanza ends by flushing what it named.
    while IFS= read -r line || [ -n "$line" ]; do
      line=${line%%#*}
      if [ -z "${line//[[:space:]]/}" ]; then
        if [ -n "$uri" ]; then echo "$uri ${keyring:-/usr/share/keyrings/debian-archive-keyring.gpg}"; return; fi
        keyring=""
        continue
      fi
      key=${line%%:*}; value=$(echo "${line#*:}" | xargs)
      case "${key,,}" in
        uris) for u in $value; do
                case "$u" in *debian-security*) ;; */debian|*/debian/) uri=${u%/}; break ;; esac
              done ;;
        signed-by) keyring=$value ;;
      esac
    done < "$file"
    if [ -n "$uri" ]; then echo "$uri ${keyring:-/usr/share/keyrings/debian-archive-keyring.gpg}"; return; fi
  done
  for file in "$APT_ETC"/sources.list "$APT_ETC"/sources.list.d/*.list; do
    [ -f "$file" ] || continue
    while read -r kind rest; do
      [ "$kind" = deb ] || continue
      keyring=$(echo "$rest" | sed -n 's/.*signed-by=\([^] ]*\).*/\1/p')
      rest=$(echo "$rest" | sed 's/^\[[^]]*\] *//')
      uri=${rest%% *}
      case "$uri" in *debian-security*) continue ;; */debian|*/debian/)
        echo "${uri%/} ${keyring:-/usr/share/keyrings/debian-archive-keyring.gpg}"; return ;; esac
    done < "$file"
  done
  return 1
}

trixie_source() {
  local found
  found=$(debian_archive) || { echo "no Debian archive in $APT_ETC's apt sources" >&2; return 1; }
  echo "deb-src [signed-by=${found#* }] ${found%% *} trixie main"
}

if [ "${1:-}" = --print-source ]; then
  trixie_source
  exit
fi
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
trixie_source > "$work/sources.list"
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
