"""scripts/install-pgvector.sh takes the Debian archive address from the machine's own apt sources
(deb822 `.sources` stanzas or one-line `deb` entries), skipping debian-security, and says so when
there is none. Exercised with `--print-source` against sample apt folders (APT_ETC)."""

from __future__ import annotations

import os
import subprocess

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "install-pgvector.sh"
DEFAULT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def print_source(apt_etc) -> subprocess.CompletedProcess:
    env = {**os.environ, "APT_ETC": str(apt_etc)}
    return subprocess.run(["bash", str(SCRIPT), "--print-source"], env=env, capture_output=True, text=True)


def test_a_deb822_mirror_is_used_and_debian_security_skipped(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\nComponents: main\n\n"
        "Types: deb\n# a comment\nURIs: https://mirror.example/debian/\nSuites: bookworm\nComponents: main\n"
        "Signed-By: /etc/apt/keyrings/mirror.gpg\n"
    )
    done = print_source(tmp_path)
    assert done.returncode == 0, done.stderr
    expected = "deb-src [signed-by=/etc/apt/keyrings/mirror.gpg] https://mirror.example/debian trixie main"
    assert done.stdout.strip() == expected


def test_a_one_line_sources_list_is_read_too(tmp_path):
    (tmp_path / "sources.list").write_text(
        "deb http://security.debian.org/debian-security bookworm-security main\n"
        "deb [arch=amd64] http://proxy.example:3142/debian bookworm main\n"
    )
    done = print_source(tmp_path)
    assert done.stdout.strip() == f"deb-src [signed-by={DEFAULT_KEYRING}] http://proxy.example:3142/debian trixie main"


def test_no_debian_archive_is_an_error_not_a_guess(tmp_path):
    done = print_source(tmp_path)
    assert done.returncode != 0 and "no Debian archive" in done.stderr and done.stdout == ""


def test_this_machine_has_an_archive_address():
    done = print_source("/etc/apt")
    assert done.returncode == 0 and done.stdout.startswith("deb-src [signed-by=") and " trixie main" in done.stdout
