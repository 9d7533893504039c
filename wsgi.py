"""WSGI entry point: `gunicorn -k gevent wsgi:app`."""
from app import create_app

app = create_app()
