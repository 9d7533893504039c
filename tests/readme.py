"""The README's examples, extracted and run as a reader would (with the server's key and address)."""
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
PLACEHOLDER_URL = "http://127.0.0.1:8000"


def examples(heading, markdown=None):
    """[(language, code)] of the fenced blocks in the README's section under `heading`."""
    markdown = markdown or README.read_text()
    section = markdown.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)


def run(language, code, key, base_url, **replacements):
    """The example's output; it must exit 0."""
    code = code.replace("sk_...", key).replace(PLACEHOLDER_URL, base_url)
    for old, new in replacements.items():
        code = code.replace(old, new)
    command = ["bash", "-eu", "-c", code] if language == "sh" else [sys.executable, "-c", code]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, f"{language} example failed:\n{code}\n{result.stdout}\n{result.stderr}"
    return result.stdout
