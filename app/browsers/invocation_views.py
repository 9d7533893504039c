"""The browser sessions created for an invocation (/invocations/{id}/browsers).

Served by the browsers area, which knows sessions and how they end; the invocations area
knows nothing of browsers, so the two areas import one way only.
"""
from flask import g
from flask.views import MethodView

from app.browsers import lifecycle, sessions
from app.browsers.schemas import InvocationBrowsersSchema
from app.core.api import Blueprint
from app.invocations.lifecycle import find as find_invocation

blp = Blueprint("invocation_browsers", __name__, url_prefix="/invocations",
                description="Browser sessions created for an invocation.")


@blp.route("/<invocation_id>/browsers")
class InvocationBrowsers(MethodView):
    @blp.response(200, InvocationBrowsersSchema)
    def get(self, invocation_id):
        """Active browser sessions created for the invocation (with its invocation_id)"""
        browsers = sessions.of_invocation(find_invocation(g.project, invocation_id))
        return {"browsers": [sessions.record(session) for session in browsers]}

    @blp.response(204)
    def delete(self, invocation_id):
        """End every active browser session of the invocation"""
        for session in sessions.of_invocation(find_invocation(g.project, invocation_id)):
            lifecycle.end(session)
