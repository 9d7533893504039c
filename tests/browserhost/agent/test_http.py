"""The agent's HTTP core: routing, errors in the API's shape, one request per connection."""


def test_unknown_route_is_404_in_the_error_shape(agent):
    reply = agent.call("GET", "/nowhere")
    assert reply.status == 404
    assert reply.json()["code"] == "not_found"
    assert reply.headers["Connection"] == "close"
