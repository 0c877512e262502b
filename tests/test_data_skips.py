"""A run whose tests skip for want of Multi30k ends with a line that says so (data_skips.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def plugin_on_path(monkeypatch):
    """The inner pytest runs in a folder of its own: data_skips from tests/, and no other
    plugin (the installed ones change nothing here and take most of its start)."""
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def test_a_run_short_of_the_data_says_so_in_its_last_line(pytester):
    pytester.makepyfile(
        test_inner="""
        import pytest
        from data_skips import MISSING_DATA

        def test_needs_data():
            pytest.skip(f"{MISSING_DATA} (nowhere)")

        def test_also_needs_data():
            pytest.skip(f"{MISSING_DATA} (nowhere)")

        def test_other():
            pytest.skip("not this machine")

        def test_runs():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "data_skips")
    lines = result.outlines
    assert "1 passed, 3 skipped" in lines[-2]
    assert lines[-1].startswith("2 tests skipped: Multi30k not found (set NMT_DATA_DIR")


def test_a_run_with_the_data_ends_with_pytests_counts(pytester):
    pytester.makepyfile(test_inner="def test_runs():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "data_skips")
    assert "1 passed" in result.outlines[-1]
