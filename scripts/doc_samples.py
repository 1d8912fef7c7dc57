"""The sample outputs the docs show, made by running the commands that print them: never pasted.

    .venv/bin/python scripts/doc_samples.py           # run each sample's command, rewrite its blocks in the pages
    .venv/bin/python scripts/doc_samples.py --check   # run them; exit 1 naming each block that differs

A page marks a generated block with ``<!-- sample: NAME -->`` on the line before its opening fence. Paths under
the checkout are shown relative to it (the pages are read on other machines); ``--check`` also ignores what
changes from run to run (a results folder's timestamp and pid, pytest's seconds).
tests/integration/test_docs_commands.py checks the marks and, in its slow tier, the blocks themselves.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"^<!-- sample: ([a-z0-9-]+) -->\n```[a-z]*\n(.*?)^```$", re.M | re.S)


@dataclass(frozen=True)
class Sample:
    command: tuple[str, ...]
    pages: tuple[str, ...]
    why: str
    timeout_s: float = 600


SAMPLES: dict[str, Sample] = {
    # the last lines of the main job on a CPU machine: one line per case, then pytest's own count
    "grpo-tail": Sample((sys.executable, "-m", "pytest", "-m", "grpo", "-p", "no:cacheprovider"),
                        ("README.md", "docs/getting-started.md", "docs/running.md"),
                        "the main job's verdict lines"),
    # a project A/B-ing its own commits, end to end, on a two-branch git repository built in a temporary folder
    "ab-own-commits": Sample((sys.executable, "scripts/ab_own_commits.py"), ("docs/ab.md",),
                             "the documented A/B of a project's own commits", timeout_s=1800),
}


def grpo_tail(output: str) -> str:
    """The case lines pytest's terminal summary ends with (the plugin's section), then the count line."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "rl-autotest cases" in line) + 1
    cases = []
    for line in lines[start:]:
        if line.startswith("="):
            break
        cases.append(line)
    count = lines[-1].strip("= ").strip()
    return "\n".join([*cases, count])


EXTRACT = {"grpo-tail": grpo_tail, "ab-own-commits": lambda output: output.rstrip("\n")}


def portable(text: str) -> str:
    """Paths under this checkout, relative to it."""
    return text.replace(f"{ROOT}/", "")


def volatile(text: str) -> str:
    """What differs between two runs of the same code: the results folder's name, the cost, pytest's seconds."""
    text = re.sub(r"\d{8}-\d{6}-pid\d+", "<run>", text)
    text = re.sub(r"(for|cost) \d+(\.\d+)? (CPU|GPU|core)-s", r"\1 <cost> \3-s", text)  # measured, varies per run
    text = re.sub(r"complete in \d+ s", "complete in <s> s", text)
    return re.sub(r" in \d+(\.\d+)?s( \(\d+:\d\d:\d\d\))?", " in <s>s", text)


def generate(name: str) -> str:
    sample = SAMPLES[name]
    done = subprocess.run(sample.command, cwd=ROOT, capture_output=True, text=True, timeout=sample.timeout_s)
    if done.returncode not in (0, 1):
        raise SystemExit(f"doc_samples: {name}: `{' '.join(sample.command)}` exited {done.returncode}:\n"
                         f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return portable(EXTRACT[name](done.stdout))


def blocks(page: Path) -> dict[str, str]:
    """Every marked block of a page: name → its text (without the fences)."""
    return {m.group(1): m.group(2).rstrip("\n") for m in MARK.finditer(page.read_text(encoding="utf-8"))}


def rewrite(page: Path, name: str, text: str) -> bool:
    before = page.read_text(encoding="utf-8")

    def put(m: re.Match[str]) -> str:
        if m.group(1) != name:
            return m.group(0)
        fence = m.group(0).split("\n", 2)[1]
        return f"<!-- sample: {name} -->\n{fence}\n{text}\n```"

    after = MARK.sub(put, before)
    if after != before:
        page.write_text(after, encoding="utf-8")
    return after != before


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        print("usage: doc_samples.py [--check]", file=sys.stderr)
        return 2
    differing = []
    for name, sample in SAMPLES.items():
        text = generate(name)
        for page in sample.pages:
            shown = blocks(ROOT / page).get(name)
            if shown is None:
                differing.append(f"{page}: no `<!-- sample: {name} -->` block")
            elif check and volatile(shown) != volatile(text):
                differing.append(f"{page}: sample {name} differs from what `{' '.join(sample.command[1:])}` "
                                 f"prints now; run scripts/doc_samples.py\n--- shown\n{shown}\n--- now\n{text}")
            elif not check and rewrite(ROOT / page, name, text):
                print(f"rewrote {page}: {name}")
    for line in differing:
        print(f"doc_samples: {line}", file=sys.stderr)
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
