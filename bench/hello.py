"""The baseline of bench/run.py: a Flask JSON hello world, served the way Lantern is (gunicorn.conf.py's worker)."""
from flask import Flask

app = Flask(__name__)


@app.get("/hello")
def hello():
    return {"hello": "world"}
