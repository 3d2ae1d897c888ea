"""A pytest plugin that appends every test's progress to a file as it happens, one JSON object a line.

`blackwell-stack kernel test` copies this file beside each test process and loads it with `-p`; the file named by
$BLACKWELL_STACK_TEST_OUTCOMES gets a `start` line when a test begins, one `report` line per phase (setup, call,
teardown) and an `end` line when it is done, `collect_error` or `collect_skip` for a file that cannot be collected
or skips itself, then `finish` with pytest's exit status. Each line is written and closed at once, so when a kernel
kills the process (a segmentation fault) the file still says which test was running. Standard library only: it
runs in the environment under test.
"""

import json
import os

ENV = "BLACKWELL_STACK_TEST_OUTCOMES"


def _write(event):
    path = os.environ.get(ENV)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event) + "\n")


def pytest_runtest_logstart(nodeid, location):
    _write({"event": "start", "id": nodeid})


def pytest_runtest_logreport(report):
    _write({"event": "report", "id": report.nodeid, "when": report.when, "outcome": report.outcome})


def pytest_runtest_logfinish(nodeid, location):
    _write({"event": "end", "id": nodeid})


def pytest_collectreport(report):
    if report.failed:
        _write({"event": "collect_error", "id": report.nodeid or "(collection)"})
    elif report.skipped:  # pytest.skip(..., allow_module_level=True): the whole file skipped itself
        _write({"event": "collect_skip", "id": report.nodeid or "(collection)"})


def pytest_sessionfinish(session, exitstatus):
    _write({"event": "finish", "status": int(exitstatus)})
