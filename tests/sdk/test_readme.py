"""The README's "Try it" examples run as written, in order, on a fresh organization (#11 item 16)."""
from tests.readme import examples, run


def test_the_try_it_examples_run_in_order_on_a_fresh_organization(live_server):
    key = live_server.new_org()
    blocks = examples("Try it")
    assert [language for language, _ in blocks] == ["sh", "python"]
    outputs = [run(language, code, key, live_server.base_url) for language, code in blocks]
    # curl prints the API's answers: none may be an error body.
    assert '"code":' not in outputs[0] and '"name":"scrapers"' in outputs[0].replace(" ", "")
    assert outputs[1].rstrip().endswith("1 console_log")
