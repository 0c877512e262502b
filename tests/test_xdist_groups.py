"""The suite's own promise: tests marked `xdist_group` share one worker under `make test`'s
`--dist loadgroup` (one set of servers, one second model). pytest 9.2 broke it without a word
(pytest-xdist#1386), which pyproject's pin keeps out."""

from __future__ import annotations

import re


def test_a_marked_group_runs_on_one_worker(pytester, monkeypatch):
    pytester.makepyfile(
        test_grouped="""
        import pytest

        @pytest.mark.xdist_group("g")
        @pytest.mark.parametrize("i", range(4))
        def test_grouped(i):
            pass

        @pytest.mark.parametrize("i", range(8))
        def test_free(i):
            pass
        """
    )
    # xdist alone: the other installed plugins (hypothesis, anyio, ...) change nothing here
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--dist", "loadgroup", "-v")
    result.assert_outcomes(passed=12)
    ran = re.findall(r"\[(gw\d)\].*PASSED \S+::(test_\w+)", result.stdout.str())
    assert len(ran) == 12, result.stdout.str()
    assert len({worker for worker, name in ran if name == "test_grouped"}) == 1
