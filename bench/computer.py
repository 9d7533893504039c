"""Computer use through Lantern (`make bench`, or `.venv/bin/python bench/computer.py`).

Starts gunicorn (1 gevent worker, host driver) and one sandboxed browser host on a private database, and
measures, each beside its baseline in the same run:
1. Screenshots: POST /browsers/{id}/computer/screenshot (PNG bytes back) beside Page.captureScreenshot straight
   to the same page over its browser's DevTools (base64 in JSON), headless, same viewport.
2. click_mouse (not smooth): POST .../computer/click_mouse round trips, headless (DevTools input) and headful
   (xdotool on its X display), beside the same three input events sent straight to the headless page.
   Both on a still page.
3. Recording: CPU and memory (PSS) of the ffmpeg of one replay at 25 fps of a 1280x800 screen, for a headful
   session (x11grab) and a headless one (screencast frames fed by the host), over a page that animates.
4. Live view: frames per second its page shows of that animating page, in a separate headless Chromium.
Prints Markdown tables for docs/benchmarks.md. Traffic stays on 127.0.0.1.
"""
import argparse
import shlex
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.browsers import Cdp, lantern_with_a_host, pct, session_devtools  # noqa: E402
from browserhost import launch  # noqa: E402
from tests.browserhost.helpers import Site  # noqa: E402
from tests.chromium import Browser  # noqa: E402

COMMAND = shlex.join([".venv/bin/python", "bench/computer.py", *sys.argv[1:]])
# A still page (screenshots and clicks), and one that changes every frame: a moving box and a counter (recordings
# and the live view; input and screenshots wait for its frames).
STILL = b"<!doctype html><body style='margin:0;background:#fff'><div style='margin:40px;width:300px;height:200px;" \
        b"background:#07f'></div><button>a button</button>"
ANIMATED = (b"<!doctype html><body style='margin:0;background:#fff'><div id=box style='position:absolute;"
            b"width:200px;height:200px;background:#07f'></div><h1 id=n></h1><script>let n = 0;"
            b"(function frame() { n++; box.style.left = (n * 7 % 1000) + 'px'; box.style.top = (n * 3 % 500) + 'px';"
            b"document.getElementById('n').textContent = n; requestAnimationFrame(frame); })()</script>")
TICKS = 100  # clock ticks per second of /proc/<pid>/stat (os.sysconf("SC_CLK_TCK") on Linux)


class Session:
    def __init__(self, base_url, key, site_url, **options):
        # One kept-alive connection, as the SDKs keep theirs: a connection (and a client) per call added some
        # 18 ms to every call measured, none of it Lantern's.
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        created = self.http.post("/browsers", json=options).json()
        self.id, self.cdp_ws_url = created["session_id"], created["cdp_ws_url"]
        self.cdp = Cdp(self.cdp_ws_url)
        target = next(t for t in self.cdp.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.page = self.cdp.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})[
            "sessionId"]
        self.cdp.call("Page.navigate", {"url": site_url}, session_id=self.page)
        time.sleep(1)

    def navigate(self, url):
        self.cdp.call("Page.navigate", {"url": url}, session_id=self.page)
        time.sleep(1)

    def post(self, path, body=None):
        answer = self.http.post(f"/browsers/{self.id}{path}", json=body)
        answer.raise_for_status()
        return answer

    def close(self):
        self.cdp.close()
        self.http.delete(f"/browsers/{self.id}")
        self.http.close()


def timed(action, count):
    times = []
    for _ in range(count):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return times


def screenshots(session, workdir, count):
    """{path: times} of screenshots through Lantern and straight to the page's DevTools."""
    devtools = session_devtools(workdir, session.id)
    straight = Cdp(devtools.ws_url(), devtools.connect())
    target = next(t for t in straight.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
    page = straight.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})["sessionId"]
    rows = {"through Lantern (POST .../computer/screenshot)": timed(lambda: session.post("/computer/screenshot"),
                                                                    count),
            "straight to Chromium (Page.captureScreenshot)": timed(lambda: straight.call(
                "Page.captureScreenshot", {"format": "png"}, session_id=page), count)}
    straight.close()
    return rows


_straight = {}


def straight_click(session, workdir):
    """A click as the host sends it to a headless page (move, press, release), straight over its DevTools."""
    if session.id not in _straight:
        devtools = session_devtools(workdir, session.id)
        cdp = Cdp(devtools.ws_url(), devtools.connect())
        target = next(t for t in cdp.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        _straight[session.id] = cdp, cdp.call("Target.attachToTarget", {"targetId": target["targetId"],
                                                                      "flatten": True})["sessionId"]
    cdp, page = _straight[session.id]
    for kind, button, buttons, count in (("mouseMoved", "none", 0, 0), ("mousePressed", "left", 1, 1),
                                         ("mouseReleased", "left", 0, 1)):
        cdp.call("Input.dispatchMouseEvent", {"type": kind, "x": 5, "y": 5, "button": button, "buttons": buttons,
                                              "clickCount": count}, session_id=page)


def ffmpeg_pids():
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == "ffmpeg":
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


def cpu_seconds(pid):
    fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def pss_mib(pid):
    for line in (Path("/proc") / str(pid) / "smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def recording(session, seconds):
    """(cores used, PSS MiB, video bytes) of one replay at 25 fps, measured over `seconds` once it runs."""
    before = set(ffmpeg_pids())
    replay = session.post("/replays", {"framerate": 25}).json()
    time.sleep(1)
    [pid] = set(ffmpeg_pids()) - before
    start_cpu, start = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    cores = (cpu_seconds(pid) - start_cpu) / (time.monotonic() - start)
    pss = pss_mib(pid)
    session.post(f"/replays/{replay['replay_id']}/stop")
    listed = session.http.get(f"/browsers/{session.id}/replays").json()
    return cores, pss, next(r["size_bytes"] for r in listed if r["replay_id"] == replay["replay_id"])


def live_view_fps(session, seconds):
    """Frames per second the live view page shows of the session's animating page."""
    url = "http" + session.cdp_ws_url[2:].replace("/cdp?", "/live?")
    viewer = Browser(launch.find_chromium(), extra_args=("--window-size=1280,800",))
    try:
        page = viewer.new_page()
        page.navigate(url)
        page.wait_for("document.getElementById('state')?.textContent === 'live'", what="the live view connected")
        page.evaluate("window.frames_shown = 0; document.getElementById('screen').onload = () => frames_shown++")
        viewer.pump(seconds)
        return page.evaluate("frames_shown") / seconds
    finally:
        viewer.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screenshots", type=int, default=30)
    parser.add_argument("--clicks", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0, help="of each recording and of the live view")
    args = parser.parse_args()
    if launch.find_chromium() is None:
        sys.exit("no Chromium: apt-get install chromium")
    site = Site()
    site.get = lambda handler: handler.answer(200, ANIMATED if handler.path == "/animated" else STILL, "text/html")
    site.start()
    with lantern_with_a_host("on") as (base_url, key, _, workdir):
        headless = Session(base_url, key, site.url + "/", headless=True,
                           viewport={"width": 1280, "height": 800})
        headful = Session(base_url, key, site.url + "/", headless=False, viewport={"width": 1280, "height": 800})
        try:
            shots = screenshots(headless, workdir, args.screenshots)  # of the still page
            clicks = {kind: timed(lambda s=s: s.post("/computer/click_mouse", {"x": 5, "y": 5}), args.clicks)
                      for kind, s in (("headless (DevTools input)", headless), ("headful (xdotool)", headful))}
            clicks["straight to Chromium (the same three Input.dispatchMouseEvent, headless)"] = timed(
                lambda: straight_click(headless, workdir), args.clicks)
            for session in (headless, headful):
                session.navigate(site.url + "/animated")
            recordings = {kind: recording(s, args.seconds) for kind, s in (("headful (x11grab)", headful),
                                                                            ("headless (screencast)", headless))}
            fps = live_view_fps(headless, args.seconds)
        finally:
            for cdp, _ in _straight.values():
                cdp.close()
            headless.close()
            headful.close()
    site.stop()

    print(f"`{COMMAND}` (1280x800 viewports, sandboxed host, 1 gevent worker)\n")
    print("| screenshot | p50 ms | p95 ms |\n|---|---|---|")
    for name, times in shots.items():
        print(f"| {name} | {pct(times, 50):.1f} | {pct(times, 95):.1f} |")
    ratio = [pct(times, p) for times in shots.values() for p in (50, 95)]
    print(f"\nratio through Lantern / straight: p50 {ratio[0] / ratio[2]:.2f}, p95 {ratio[1] / ratio[3]:.2f}\n")
    print("| click_mouse round trip | p50 ms | p95 ms | mean ms |\n|---|---|---|---|")
    for name, times in clicks.items():
        print(f"| {name} | {pct(times, 50):.1f} | {pct(times, 95):.1f} | {statistics.mean(times) * 1000:.1f} |")
    print(f"\n| recording at 25 fps, 1280x800, {args.seconds:.0f} s | ffmpeg CPU (cores) | ffmpeg PSS MiB | "
          f"video KiB/s |\n|---|---|---|---|")
    for name, (cores, pss, size) in recordings.items():
        print(f"| {name} | {cores:.2f} | {pss:.0f} | {size / 1024 / (args.seconds + 1):.0f} |")
    print(f"\nlive view of an animating page (headless session): {fps:.1f} frames per second shown")


if __name__ == "__main__":
    main()
