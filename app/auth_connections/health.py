"""Health checks: is the profile still logged in? With auto_reauth and a stored login, a
connection found logged out starts a REAUTH flow.

A check loads the profile's cookies into the login driver and opens the page the last
login landed on: a login form there means the site wants a login again. Due checks run
from `run_due` (every AUTH_HEALTH_CHECK_POLL_SECONDS in each gunicorn worker, see
app/core/periodic.py, or `flask auth check`); each due connection is claimed with one conditional UPDATE, so
two workers never check the same one twice.
"""
import logging
from datetime import timedelta

from app.auth_connections import credentials, loginflow
from app.auth_connections.formdriver import FormLogin, LoginError
from app.auth_connections.models import AUTHENTICATED, NEEDS_AUTH, REAUTH, AuthConnection, HealthCheck
from app.core import clock
from app.core.db import db
from app.core.settings import settings
from app.profiles.models import Profile

logger = logging.getLogger(__name__)


def check(connection, *, timeout):
    """Check one connection now; returns the HealthCheck recorded.

    The site is asked without a database connection held (it may take the whole timeout).
    """
    previous = connection.status
    driver = FormLogin(allowed_hosts=credentials.allowed_hosts(connection), timeout=timeout)
    with db.connection_context():
        driver.load_cookies(Profile.get_by_id(connection.profile_id).state()["cookies"])
    error_code = error_message = None
    try:
        page = driver.check(connection.post_login_url or credentials.login_url(connection))
        if page.status >= 500 or page.status == 429:
            raise LoginError("site_unavailable", f"The site answered {page.status}.")
        status = AUTHENTICATED if page.kind == "success" else NEEDS_AUTH
    except LoginError as error:
        # The site could not be asked: the status stays what it was.
        status, error_code, error_message = previous, error.code, str(error)
    now = clock.now()
    next_check = now + timedelta(seconds=connection.health_check_interval) if connection.health_checks else None
    with db.connection_context():
        result = HealthCheck.create(connection=connection.id, status=status, previous_status=previous,
                                    checked_at=now, error_code=error_code, error_message=error_message)
        (AuthConnection.update(status=status, last_auth_check_at=now, next_check_at=next_check)
         .where(AuthConnection.id == connection.id).execute())
        connection.status = status
        if (status == NEEDS_AUTH and previous == AUTHENTICATED and connection.auto_reauth
                and connection.credential_ref):
            loginflow.start(connection, REAUTH)
    return result


def run_due(*, timeout, limit=20):
    """Check the connections whose check is due; returns how many were checked."""
    now = clock.now()
    with db.connection_context():
        due = list(AuthConnection.select().where(
            AuthConnection.health_checks & AuthConnection.next_check_at.is_null(False)
            & (AuthConnection.next_check_at <= now)).limit(limit))
    checked = 0
    for connection in due:
        with db.connection_context():
            claimed = (AuthConnection.update(next_check_at=now + timedelta(seconds=connection.health_check_interval))
                       .where((AuthConnection.id == connection.id)
                              & (AuthConnection.next_check_at == connection.next_check_at)).execute())
        if claimed:
            try:
                check(connection, timeout=timeout)
                checked += 1
            except Exception:  # noqa: BLE001 - one broken connection must not stop the others
                logger.exception("health check of auth connection %s failed", connection.id)
    return checked


def run_due_checks():
    config = settings()
    run_due(timeout=config.auth_flow_http_timeout_seconds)
