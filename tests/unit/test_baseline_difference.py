"""Which object the refusal of an older database names (zm_roi.baseline.first_difference)."""

from zm_roi.baseline import first_difference

BASELINE = [("function", "roi.a()", "body a"), ("index", "roi.i", "create index i"), ("relation", "roi.t", "r")]


def test_an_equal_outline_differs_in_nothing():
    assert first_difference(list(BASELINE), BASELINE) == "nothing"


def test_the_first_object_in_name_order_is_named_with_how_it_differs():
    changed = [("function", "roi.a()", "older body"), *BASELINE[1:]]
    assert first_difference(changed, BASELINE) == "function roi.a() differs"
    assert first_difference(BASELINE[1:], BASELINE) == "function roi.a() is missing"
    extra = [*BASELINE, ("trigger", "roi.t.gone", "create trigger gone")]
    assert first_difference(extra, BASELINE) == "trigger roi.t.gone is not in the baseline"
