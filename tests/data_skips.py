"""A pytest plugin (conftest loads it): a run whose tests skipped for want of Multi30k says so
in its very last line, after pytest's own counts, so a green run without the data cannot pass
for a tested one."""

from __future__ import annotations

import pytest

MISSING_DATA = "Multi30k not found"
WHERE = "set NMT_DATA_DIR, or put {train,val,test_2016_flickr}.{en,de} in ../shared/data/multi30k"


class DataSkips:
    """Counts the skips where the reports meet: the one process, or xdist's controller."""

    def __init__(self) -> None:
        self.skipped = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and MISSING_DATA in str(report.longrepr):
            self.skipped += 1

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """After the session's summary line, so this is the last line."""
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        if self.skipped and terminal is not None:
            terminal.write_line(
                f"{self.skipped} tests skipped: {MISSING_DATA} ({WHERE})", red=True, bold=True
            )


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # an xdist worker's reports reach the controller
        config.pluginmanager.register(DataSkips(), "data_skips_counter")
