"""A session's files through Lantern (`.venv/bin/python bench/files.py`).

Starts gunicorn (1 gevent worker, host driver) and one sandboxed browser host on a private database, and measures
in one headless session (1 GiB), each beside its baseline in the same run:
1. write_file: PUT /browsers/{id}/fs/write_file of a 256 MiB body into the session's /tmp, beside `cat` inside the
   sandbox copying the same file to a new one (the same bytes landing on the same memory-backed folder).
2. read_file: GET /browsers/{id}/fs/read_file of that file, read to its end by the client, beside `cat` inside the
   sandbox of the same file into a pipe (`cat FILE | wc -c`: what the agent does with its socket).
   The baselines are timed inside the sandbox (a process.exec of python3 timing the shell command).
3. The most resident memory (VmHWM) the app's gunicorn processes and the browser host gained over all of it: bytes
   stream, no process holds a file.
Prints Markdown tables for docs/benchmarks.md. Traffic stays on 127.0.0.1.
"""
import argparse
import base64
import io
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.browsers import lantern_with_a_host  # noqa: E402
from browserhost import launch  # noqa: E402

COMMAND = shlex.join([".venv/bin/python", "bench/files.py", *sys.argv[1:]])
MIB = 1024 * 1024
INSIDE = "/tmp/bench.bin"
# Run inside the sandbox: seconds a shell command took (what process.exec adds is not in it).
TIMED = "import subprocess, sys, time\nbegan = time.perf_counter()\n" \
        "subprocess.run(sys.argv[1], shell=True, check=True, stdout=subprocess.DEVNULL)\n" \
        "print(time.perf_counter() - began)"


class Session:
    def __init__(self, base_url, key):
        # One kept-alive connection, as the SDKs keep theirs.
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=300)
        self.id = self.call("POST", "/browsers", json={"headless": True, "timeout_seconds": 3600}).json()["session_id"]

    def call(self, method, path, **options):
        answer = self.http.request(method, path, **options)
        answer.raise_for_status()
        return answer

    def exec(self, command, *args):
        answer = self.call("POST", f"/browsers/{self.id}/process/exec", json={"command": command, "args": list(args)})
        result = answer.json()
        if result["exit_code"] != 0:
            raise RuntimeError(f"{command} {args}: {result}")
        return base64.b64decode(result["stdout_b64"]).decode()

    def timed_inside(self, shell_command):
        return float(self.exec("python3", "-c", TIMED, shell_command))

    def close(self):
        self.http.delete(f"/browsers/{self.id}")
        self.http.close()


def write_once(session, body):
    began = time.perf_counter()
    # A file object, as an SDK caller passes a file: httpx sends it 64 KiB at a time. (One bytes object of 256 MiB is
    # sent by httpcore with a copy of what is left after each send, which alone held this at some 90 MiB/s.)
    session.call("PUT", f"/browsers/{session.id}/fs/write_file", params={"path": INSIDE},
                 content=io.BytesIO(body), headers={"Content-Type": "application/octet-stream"})
    return time.perf_counter() - began


def read_once(session, size):
    began, got = time.perf_counter(), 0
    with session.http.stream("GET", f"/browsers/{session.id}/fs/read_file", params={"path": INSIDE}) as answer:
        answer.raise_for_status()
        for chunk in answer.iter_raw(MIB):
            got += len(chunk)
    if got != size:
        raise RuntimeError(f"read_file gave {got} bytes of {size}")
    return time.perf_counter() - began


def peak_kib(pids):
    """{pid: VmHWM KiB} of the processes still there."""
    peaks = {}
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peaks[pid] = int(line.split()[1])
        except OSError:
            pass
    return peaks


def gunicorn_pids(base_url):
    """The app's gunicorn processes (arbiter and worker) serving `base_url`."""
    bind = base_url.removeprefix("http://")
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and "gunicorn" in (entry / "cmdline").read_text() \
                    and bind in (entry / "cmdline").read_text():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def measure(session, size, rounds):
    body = os.urandom(size)
    rows = {"write": [], "write baseline": [], "read": [], "read baseline": []}
    for _ in range(rounds):
        rows["write"].append(write_once(session, body))
        rows["read"].append(read_once(session, size))
        rows["read baseline"].append(session.timed_inside(f"cat {INSIDE} | wc -c"))
        rows["write baseline"].append(session.timed_inside(f"cat {INSIDE} > /tmp/copy.bin; rm /tmp/copy.bin"))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="size of the file written and read")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if launch.find_chromium() is None:
        sys.exit("no Chromium: apt-get install chromium")
    size = args.mib * MIB
    with lantern_with_a_host("on") as (base_url, key, host, _):
        session = Session(base_url, key)
        try:
            session.exec("true")  # the session's agent starts on its first call
            watched = [*gunicorn_pids(base_url), host.pid]
            before = peak_kib(watched)
            rows = measure(session, size, args.rounds)
            after = peak_kib(watched)
        finally:
            session.close()

    print(f"`{COMMAND}` ({args.mib} MiB, {args.rounds} rounds, sandboxed host, 1 gevent worker, headless session)\n")
    print("| path | median MiB/s | best MiB/s |\n|---|---|---|")
    names = {"write": "write_file through Lantern (PUT .../fs/write_file)",
             "write baseline": "cat FILE > COPY inside the sandbox",
             "read": "read_file through Lantern (GET .../fs/read_file)",
             "read baseline": "cat FILE | wc -c inside the sandbox"}
    rates = {kind: [args.mib / seconds for seconds in times] for kind, times in rows.items()}
    for kind, name in names.items():
        print(f"| {name} | {statistics.median(rates[kind]):.0f} | {max(rates[kind]):.0f} |")
    for kind in ("write", "read"):
        ratio = statistics.median(rates[kind]) / statistics.median(rates[f"{kind} baseline"])
        print(f"\n{kind}_file / cat, median throughput: {ratio:.2f} (goal >= 0.5)")
    gained = {pid: (after.get(pid, 0) - before.get(pid, 0)) / 1024 for pid in before}
    host_gain = gained.pop(host.pid, 0.0)
    app_gain = max(gained.values(), default=0.0)
    print(f"\nMost resident memory gained over the run (VmHWM): gunicorn processes {app_gain:.1f} MiB at most, the "
          f"browser host {host_gain:.1f} MiB ({args.rounds} x {args.mib} MiB each way).")


if __name__ == "__main__":
    main()
