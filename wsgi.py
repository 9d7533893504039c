"""WSGI entry point: `gunicorn -k gevent wsgi:app`."""
from app import create_app
from app.core import periodic, shutdown

app = create_app()
shutdown.install()
periodic.start(app)
