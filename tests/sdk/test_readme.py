"""The README's "Try it" examples run as written, in order, on a fresh organization (#11 item 16)."""
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
PLACEHOLDER_URL = "http://127.0.0.1:8000"


def examples(markdown, heading):
    """[(language, code)] of the fenced blocks in the section under `heading`."""
    section = markdown.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)


def run(language, code, key, base_url):
    code = code.replace("sk_...", key).replace(PLACEHOLDER_URL, base_url)
    command = ["bash", "-eu", "-c", code] if language == "sh" else [sys.executable, "-c", code]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, f"{language} example failed:\n{code}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_the_try_it_examples_run_in_order_on_a_fresh_organization(live_server):
    key = live_server.new_org()
    blocks = examples(README.read_text(), "Try it")
    assert [language for language, _ in blocks] == ["sh", "python"]
    outputs = [run(language, code, key, live_server.base_url) for language, code in blocks]
    # curl prints the API's answers: none may be an error body.
    assert '"code":' not in outputs[0] and '"name":"scrapers"' in outputs[0].replace(" ", "")
    assert outputs[1].rstrip().endswith("1 console_log")
