"""A session's screen (browserhost/computer.py, display.py) on real Chromium, headless (DevTools) and headful (an X
display of Xvfb, without a sandbox): typing with typos into fields that take just the text, the mouse's steps in one
run, and a list of actions sent again. Through the app and the SDK: tests/browsers/live/test_computer.py."""
import functools
import json
import random
import threading
import time
import types

import pytest

from browserhost import computer, display
from browserhost.cdp import CdpClient
from browserhost.launch import Browser
from browserhost.launch_options import LaunchOptions
from browserhost.unsandboxed import start_xvfb, xvfb_available
from lantern_wire import keyboard
from tests.browserhost.helpers import CHROMIUM, Site, navigate, needs_chromium
from tests.waiting import eventually

pytestmark = needs_chromium

PAGE = b"""<!doctype html><title>screen</title><style>body { margin: 0; user-select: none }
input { position: absolute; left: 100px; top: 100px; width: 600px; height: 30px; font-size: 20px }
#area { position: absolute; left: 100px; top: 200px; width: 600px; height: 300px }</style>
<input id=field><div id=area></div>
<script>
window.seen = [];
for (const type of ["mousedown", "mouseup", "click"])
  addEventListener(type, e => seen.push([type, e.clientX, e.clientY, e.detail]));
window.moves = 0;
addEventListener("mousemove", e => { if (e.buttons) moves++ });
</script>"""
SIZE = (1024, 768)
FIELD, AREA = (400, 115), (100, 200)  # the field's middle, the area's corner


@pytest.fixture(scope="module")
def page_site():
    site = Site(PAGE).start()
    yield site
    site.stop()


@pytest.fixture(scope="module", params=["headless", "headful"])
def screen(request, tmp_path_factory, page_site):
    """(a Screen of a browser on the page, evaluate(expression) on that page)."""
    xvfb, name = None, None
    if request.param == "headful":
        if not xvfb_available():
            pytest.skip("Xvfb is not installed (apt-get install xvfb)")
        xvfb, name = start_xvfb(tmp_path_factory.mktemp("x"), screen=(1280, 1024))
    browser = Browser.start(CHROMIUM, tmp_path_factory.mktemp("b"), LaunchOptions(viewport=SIZE, display=name))
    try:
        with CdpClient(browser.ws_url) as cdp:
            target = next(t for t in browser.devtools.get_json("/json/list") if t["type"] == "page")["id"]
            session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            navigate(cdp, session, f"{page_site.url}/")

            def evaluate(expression):
                return cdp.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                session_id=session)["result"].get("value")

            shown = display.Display(name, viewport=SIZE) if name else None
            yield computer.Screen(browser.devtools, display=shown, size=SIZE), evaluate
    finally:
        browser.stop()
        if xvfb is not None:
            xvfb.terminate()
            xvfb.wait()


@pytest.fixture
def typed_as_planned(monkeypatch):
    """typed_as_planned(seed): the screen's smooth typing follows the plan of random.Random(seed), its pauses not
    waited for (what is left typed is the same)."""
    def plan(seed):
        monkeypatch.setattr(keyboard, "human_typing", functools.partial(planned, rng=random.Random(seed)))

    planned = keyboard.human_typing
    monkeypatch.setattr(computer, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=lambda seconds: None))
    return plan


def field_holds(evaluate, value):
    """Whether the field comes to hold `value` (a display's keys reach the page a moment after xdotool sent them);
    else what it holds."""
    return eventually(lambda: evaluate("field.value") == value, 5) or evaluate("field.value")


def value_typed(screen, evaluate, text, seed, typed_as_planned, **field):
    """What the field holds once `text` was typed into it, smoothly with typos, its attributes set to `field`."""
    screen, evaluate = screen
    evaluate(f"field.value = ''; Object.assign(field, {json.dumps(field)})")
    typed_as_planned(seed)
    screen.run([{"type": "click_mouse", "x": FIELD[0], "y": FIELD[1]},
                {"type": "type_text", "text": text, "smooth": True, "typo_chance": keyboard.MAX_TYPO_CHANCE}])
    return eventually(lambda: evaluate("field.value") if len(evaluate("field.value")) >= len(text) else None,
                      5) or evaluate("field.value")  # (a display's keys reach the page a moment later)


# Seeds whose plan, before #35's review, typed the last key twice (a field of the text's maxlength dropped the
# second, and the backspace took back the first); and others.
@pytest.mark.parametrize("seed", [56, 74, 116, 1, 2])
def test_typos_leave_the_text_in_a_field_whose_maxlength_is_the_texts(screen, typed_as_planned, seed):
    assert value_typed(screen, screen[1], "12345", seed, typed_as_planned, maxLength=5) == "12345"


@pytest.mark.parametrize("seed", range(3))
def test_each_backspace_takes_back_one_mistyped_key_beside_any_characters(screen, typed_as_planned, seed):
    """A backspace takes back a whole grapheme (an emoji of several code points, a letter and its combining
    accent): typos are only ever ASCII letters and digits, so one backspace is one of them."""
    text = "naïve cafe\u0301 😀 👨‍👩‍👧 Kelvin \u212a plain words typed 42 times"
    length = screen[1](f"{json.dumps(text)}.length")  # maxlength counts UTF-16 code units
    assert value_typed(screen, screen[1], text, seed, typed_as_planned, maxLength=length) == text


def test_a_click_drag_and_smooth_move_are_one_run_of_the_display(screen, monkeypatch):
    """One xdotool for all the steps of a drag (10,000 moves) or of a click's clicks: a process per step, in a
    session's sandbox, took 150 ms each."""
    screen, evaluate = screen
    runs = []
    if screen.display is not None:
        run = screen.display.run
        monkeypatch.setattr(screen.display, "run", lambda argv, **options: runs.append(argv) or run(argv, **options))
    evaluate("seen.length = 0; moves = 0")
    screen.run([{"type": "click_mouse", "x": AREA[0] + 10, "y": AREA[1] + 10, "num_clicks": 3}])
    steps = 10_000 if screen.display else 100  # DevTools answers each move at the page's next frame: 17 ms
    screen.run([{"type": "drag_mouse", "path": [[AREA[0] + 10, AREA[1] + 20], [AREA[0] + 500, AREA[1] + 250]],
                 "steps_per_segment": steps, "step_delay_ms": 0}])
    screen.run([{"type": "move_mouse", "x": 10, "y": 10, "smooth": True, "duration_ms": 300}])
    assert eventually(lambda: len(evaluate("seen")) >= 11, 5), json.dumps(evaluate("seen"))
    clicks, drag = evaluate("seen.slice(0, 9)"), evaluate("seen.slice(9, 11)")
    assert clicks == [[kind, 110, 210, count] for count in (1, 2, 3) for kind in ("mousedown", "mouseup", "click")]
    assert drag == [["mousedown", 110, 220, 1], ["mouseup", 600, 450, 1]] and evaluate("moves") > 0
    assert screen.run([{"type": "get_mouse_position"}]) == [{"x": 10, "y": 10}]
    if screen.display is not None:
        moved = [argv for argv in runs if argv[0] == "xdotool" and argv[1] in ("-", "mousemove", "mousedown")]
        assert moved == [["xdotool", "-"]] * 3


def test_a_list_sent_again_while_it_runs_is_answered_what_it_did_not_done_twice(screen, monkeypatch):
    screen, evaluate = screen
    evaluate("field.value = ''; field.maxLength = 524288")
    actions = [{"type": "click_mouse", "x": FIELD[0], "y": FIELD[1]},
               {"type": "type_text", "text": "slow text", "delay": 150}]
    first = []
    running = threading.Thread(target=lambda: first.append(screen.run(actions)))
    running.start()
    assert eventually(lambda: evaluate("field.value"), 5)  # under way
    again = screen.run(actions, resend=True)  # waits for it to end
    running.join()
    assert again == first[0] and field_holds(evaluate, "slow text") is True
    assert screen.run(actions, resend=True) == again
    screen.run(actions)  # sent anew, not again: done
    assert field_holds(evaluate, "slow textslow text") is True  # (the resend's keys would have come before)


def test_a_resend_is_done_when_it_is_another_list_or_came_long_after(screen, monkeypatch):
    screen, evaluate = screen
    evaluate("field.value = ''")
    screen.run([{"type": "click_mouse", "x": FIELD[0], "y": FIELD[1]}])
    screen.run([{"type": "type_text", "text": "a"}])
    screen.run([{"type": "capture_screenshot"}])  # a reading between a list and its resend: not remembered
    screen.run([{"type": "type_text", "text": "a"}], resend=True)
    screen.run([{"type": "type_text", "text": "b"}], resend=True)  # another list
    assert field_holds(evaluate, "ab") is True
    monkeypatch.setattr(computer, "RESEND_SECONDS", 0)
    time.sleep(0.01)
    screen.run([{"type": "type_text", "text": "b"}], resend=True)  # not moments after it ended
    assert field_holds(evaluate, "abb") is True


def test_a_list_that_failed_part_way_sent_again_fails_the_same_without_running_again(screen):
    screen, evaluate = screen
    evaluate("field.value = ''")
    actions = [{"type": "click_mouse", "x": FIELD[0], "y": FIELD[1]}, {"type": "type_text", "text": "once"},
               {"type": "press_key", "keys": ["NoSuchKey"]}]
    with pytest.raises(computer.ActionFailed) as failed:
        screen.run(actions)
    with pytest.raises(computer.ActionFailed) as again:
        screen.run(actions, resend=True)
    assert again.value is failed.value and again.value.index == 2
    screen.run([{"type": "type_text", "text": "."}])
    assert field_holds(evaluate, "once.") is True
