"""Two or more commits side by side in one run (`.venv/bin/python bench/compare.py --base 9527bd7`): a browser's
create-to-loaded time and a headless click_mouse round trip through Lantern, each tree measured by its own
bench/browsers.py and bench/computer.py, in turns, so the machine's drift falls on every tree alike.

Each commit other than the work tree's is checked out into a temporary git worktree sharing this .venv; the
figures are the medians over rounds of each run's p50. Prints a Markdown table for docs/benchmarks.md.
"""
import argparse
import contextlib
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = shlex.join([".venv/bin/python", "bench/compare.py", *sys.argv[1:]])
# The rows each tree's benches print (their p50 is the first number after the name).
ROWS = {
    "create": ("bench/browsers.py", "POST /browsers + CDP through Lantern, sandbox on"),
    "click": ("bench/computer.py", "headless (DevTools input)"),
    "straight": ("bench/computer.py", "straight to Chromium"),
}
ARGS = {"bench/browsers.py": ["--sessions", "10", "--round-trips", "100", "--screenshots", "2"],
        "bench/computer.py": ["--screenshots", "5", "--clicks", "50", "--seconds", "2"]}


@contextlib.contextmanager
def trees(commits):
    """{label: folder}: the work tree as `HEAD`, and a worktree of each commit, removed afterwards."""
    made = {}
    with tempfile.TemporaryDirectory() as scratch:
        try:
            for commit in commits:
                folder = Path(scratch) / commit
                subprocess.run(["git", "worktree", "add", "--detach", "-q", str(folder), commit], cwd=ROOT,
                               check=True)
                (folder / ".venv").symlink_to(ROOT / ".venv")
                made[commit] = folder
            yield {**made, "HEAD": ROOT}
        finally:
            for folder in made.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT, check=False)


def p50(output, name):
    for line in output.splitlines():
        if line.startswith(f"| {name}"):
            return float(re.findall(r"\| ([0-9.]+) ", line)[0])
    raise SystemExit(f"no row {name!r} in:\n{output}")


def run(folder, script):
    done = subprocess.run([str(ROOT / ".venv/bin/python"), script, *ARGS[script]], cwd=folder, capture_output=True,
                          text=True, timeout=1800, check=False)
    if done.returncode:
        raise SystemExit(f"{script} in {folder} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", action="append", required=True, help="a commit to measure beside the work tree")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    figures = {}
    with trees(args.base) as folders:
        for _ in range(args.rounds):
            for label, folder in folders.items():
                outputs = {script: run(folder, script) for script in ARGS}
                for row, (script, name) in ROWS.items():
                    figures.setdefault(label, {}).setdefault(row, []).append(p50(outputs[script], name))
    median = {label: {row: statistics.median(values) for row, values in rows.items()}
              for label, rows in figures.items()}
    print(f"`{COMMAND}`, {args.rounds} rounds, medians of each run's p50:\n")
    print("| tree | create to loaded ms | x HEAD | click_mouse ms | straight ms | click / straight |")
    print("|---|---|---|---|---|---|")
    for label, row in median.items():
        print(f"| {label} | {row['create']:.0f} | {row['create'] / median['HEAD']['create']:.2f} | "
              f"{row['click']:.1f} | {row['straight']:.1f} | {row['click'] / row['straight']:.2f} |")


if __name__ == "__main__":
    main()
