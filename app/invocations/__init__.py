"""Invocations of app actions: lifecycle, concurrency admission, logs and their event stream."""
