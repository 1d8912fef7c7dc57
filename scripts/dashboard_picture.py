"""Make docs/history-dashboard.png from a real history: real tiny-grpo runs recorded, the project's own dashboard,
a headless Chromium screenshot (the dashboard test's browser driver).

    .venv/bin/python scripts/dashboard_picture.py [--seeds 11,12,13,14,15] [--fault lr-x10]

Each seed is one real 45-step run (`rl-autotest run tiny-grpo --seed S`, about 20-30 s on 2 cores), the fault one
more (recorded and shown, never trusted for the bands); all are recorded into a fresh SQLite history under
results/dashboard-picture/ (git-ignored). The history is opened by a relative URL from that folder, so the page
names no path of the machine that drew it. Needs chromium and websocket-client (the test extra).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "results" / "dashboard-picture"
PICTURE = ROOT / "docs" / "history-dashboard.png"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="11,12,13,14,15")
    parser.add_argument("--fault", default="lr-x10", help="one fault run beside the clean seeds ('' for none)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from tests.integration.history.browser import Browser, find_chromium

    chromium = find_chromium()
    if chromium is None:
        print("dashboard_picture: chromium not found (apt-get install chromium)", file=sys.stderr)
        return 2
    shutil.rmtree(FOLDER, ignore_errors=True)
    FOLDER.mkdir(parents=True)
    history = ["--history", "sqlite:///history.sqlite"]  # relative to FOLDER, the runs' working directory
    cli = [sys.executable, "-m", "autotest.cli"]
    runs = [["--seed", seed] for seed in args.seeds.split(",")]
    if args.fault:
        runs.append(["--seed", args.seeds.split(",")[0], "--fault", args.fault])
    for extra in runs:
        done = subprocess.run([*cli, "run", "tiny-grpo", "--yes", "--results-dir", "results", *history, *extra],
                              cwd=FOLDER, capture_output=True, text=True, timeout=900)
        print(f"dashboard_picture: run {' '.join(extra)}: exit {done.returncode}: {done.stdout.strip().splitlines()[-1]}")
        if done.returncode not in (0, 1):
            print(done.stdout[-3000:] + done.stderr[-3000:], file=sys.stderr)
            return 1
    subprocess.run([*cli, "history", "dashboard", "--out", "dashboard", *history], cwd=FOLDER, check=True)
    with Browser(chromium) as browser:
        browser.load(FOLDER / "dashboard" / "index.html")
        errors = browser.errors()
        browser.screenshot(PICTURE)
    if errors:
        print(f"dashboard_picture: the page logged errors: {errors}", file=sys.stderr)
        return 1
    print(f"dashboard_picture: wrote {PICTURE.relative_to(ROOT)} from {len(runs)} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
