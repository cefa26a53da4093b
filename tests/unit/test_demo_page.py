"""Where `zm-roi demo` writes its dashboard page: only inside its own folders."""

from __future__ import annotations

from zm_roi import demo, localdb, settings


def test_with_zm_db_home_set_the_page_goes_inside_that_folder(tmp_path):
    """Before: the page went to the folder above ZM_DB_HOME, overwriting a dashboard.html the user kept there."""
    home = tmp_path / "mine" / "db"
    page = demo.dashboard_page(settings.load({"ZM_DB_HOME": str(home)}), localdb.Cluster(home, 54322))
    assert page == home / "dashboard.html"


def test_by_default_the_page_goes_into_the_checkouts_zm_folder(tmp_path):
    home = tmp_path / "checkout" / ".zm" / "db"
    page = demo.dashboard_page(settings.load({}), localdb.Cluster(home, 54322))
    assert page == tmp_path / "checkout" / ".zm" / "dashboard.html"
