"""WSGI entry point: `gunicorn -k gevent wsgi:app`."""
from app import create_app
from app.auth_connections import health
from app.core import shutdown

app = create_app()
shutdown.install()
health.start_scheduler(app)
