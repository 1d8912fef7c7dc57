"""A nightly bisect's finding is recorded in the history and marked on the dashboard between the last PASS and
the first FAIL of the case's series."""

from __future__ import annotations

import hashlib

import pytest

from autotest.history.dashboard import culprit_index, write_dashboard
from autotest.history.drift import statistic_histories
from autotest.history.store import BisectFinding, HistoryStore, ingest
from tests.unit.history.builders import REWARDS, STEP_TIME, write_results_folder


def _sha(night: int) -> str:
    return hashlib.sha1(f"night {night}".encode()).hexdigest()


def _history(root) -> str:
    """Nights 1-3 pass, 4-5 fail (rewards past the threshold); each night at its own framework commit."""
    for night in range(1, 6):
        write_results_folder(root, "c", night, {REWARDS: 0.05 if night <= 3 else 0.5, STEP_TIME: 0.3})
    url = f"sqlite:///{root / 'history.sqlite'}"
    ingest([root], url)
    return url


def _finding(good: int, bad: int, subject: str = "optimiser: new default <lr>") -> BisectFinding:
    return BisectFinding("c", _sha(good), _sha(bad), "f" * 40, subject, "dev & co", "medium",
                         "/results/c/bisect-1")


def test_a_finding_is_read_back_for_its_case_only(tmp_path) -> None:
    url = _history(tmp_path)
    with HistoryStore.open(url) as store:
        store.add_finding(_finding(3, 4))
        (found,) = store.findings("c")
        assert (found.first_bad_sha, found.good_sha, found.bad_sha, found.confidence) == (
            "f" * 40, _sha(3), _sha(4), "medium")
        assert found.found_at  # when it was recorded
        assert store.findings("other") == []


def test_the_culprit_is_marked_at_the_first_failing_run_after_the_good_one(tmp_path) -> None:
    url = _history(tmp_path)
    with HistoryStore.open(url, read_only=True) as store:
        history = next(h for h in statistic_histories(store, "c") if h.check_id == REWARDS)
    assert culprit_index(history, _finding(3, 4)) == 3  # between night 3 (index 2) and night 4 (index 3)
    assert culprit_index(history, _finding(4, 3)) is None  # bad before good: not this series' flip
    assert culprit_index(history, _finding(3, 99)) is None  # a commit the series never ran


def test_the_dashboard_marks_the_culprit_and_links_its_bisect(tmp_path) -> None:
    url = _history(tmp_path)
    with HistoryStore.open(url) as store:
        store.add_finding(_finding(3, 4))
        page = write_dashboard(store, tmp_path / "site").read_text()
    assert page.count('<line class="culprit"') == 2  # one per gated statistic of the case
    assert "first bad commit <code>ffffffffffff</code> optimiser: new default &lt;lr&gt; (dev &amp; co)" in page
    assert '/results/c/bisect-1/bisect.md">bisect.md</a>' in page  # relative to the page
    assert "<lr>" not in page  # the commit subject is text, never markup


def test_a_history_whose_disk_turns_read_only_refuses_a_run_and_a_finding_in_one_line(tmp_path) -> None:
    from autotest.errors import UsageError
    from autotest.history.database import describe
    from autotest.history.record import read_results_folder
    from tests.filesystems import read_only, tmpfs

    later = read_results_folder(write_results_folder(tmp_path / "later", "c", 6, {REWARDS: 0.5, STEP_TIME: 0.3}))
    with tmpfs(tmp_path / "disk", size_kib=4096) as disk:
        url = _history(disk)
        with HistoryStore.open(url) as store:
            store.engine.dispose()  # no file held open for writing, or the remount is refused (EBUSY)
            read_only(disk)  # opened for writing, then the disk went read-only (a remount after an I/O error)
            refused = f"cannot write to history database {describe(url)}: attempt to write a readonly database"
            with pytest.raises(UsageError) as caught:
                store.add_finding(_finding(3, 4))
            assert str(caught.value) == refused
            with pytest.raises(UsageError) as caught:
                store.add(later)
            assert str(caught.value) == refused
            assert store.findings("c") == [] and len(store.runs("c")) == 5  # nothing half-written
