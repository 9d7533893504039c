"""The session agent: a small HTTP server that runs inside a session's sandbox, as its user, and does the files
(`/fs/...`) and processes (`/process/...`) calls of the browser API there. Standard library only; see server.py
for how it serves and http.py for its answers."""
