"""The session agent: a small HTTP server inside a session's sandbox that does the browser API's files (`/fs/...`)
and processes (`/process/...`) calls there, as the session's user, seeing what Chromium sees.

How it runs. The host starts it on a session's first files or processes call (browserhost/agents.py) with the
system's Python (`/usr/bin/python3 -I -S`: only the standard library, and inside this package only relative
imports), bound read-only at /opt/lantern/agent and imported as package `agent`. It joins the session's machine
(user and pid namespaces, files, network, firewall) in the session cgroup's `tenant` child, gets its listening
Unix socket as stdin (fd 0), moves into a user namespace of its own (at most 16 more under it, no capabilities),
makes itself not dumpable and confines itself in a Landlock domain (confine.py), and serves HTTP/1.1, one request
per connection (`Connection: close`), a thread per connection (server.py). Its log is /run/lantern/agent.log. It
dies with the session.

The contract. The host forwards `ANY /sessions/{sid}/agent/<rest>` to the agent as `/<rest>` with the query as it
came, body and answer streamed, adding `X-Lantern-Room: <bytes>` (what the session may still store, 64 MiB of the
tenant's memory kept back for the agent). The agent is the tenant's to control, so the host trusts none of its
answer's head: the app gets the status, Content-Type and Cache-Control under the host's own head, and the body up
to its framing (Content-Length, or chunked: SSE and trickled answers are chunked). A body with both a
Content-Length and chunked is 400 bad_framing. Paths are the SDK's without `/browsers/{id}`. Errors are JSON
`{"code", "message"}` (plus fields such as `room_bytes`) with a 4xx status; the agent never answers 408/409/429
or a 5xx where a retry would run something twice (the SDKs retry those). JSON answers are `application/json`;
JSON bodies are objects of at most 1 MiB.

Every path is an absolute path in the session's own root (normalised; no NUL; at most 4096 bytes); paths under
/run/lantern (the DevTools socket's folder) are refused 400, and so are deletes and moves of a folder holding it.

Routes (request -> answer):

    PUT /fs/create_directory      {path, mode?} (octal string, default "755"); parents made -> 201 empty
    PUT /fs/delete_directory      {path}, recursive; a link: the link only -> 200 empty; 404 not_found;
                                  400 not_a_directory
    PUT /fs/delete_file           {path} -> 200 empty; 404; 400 is_a_directory
    PUT /fs/move                  {src_path, dest_path}; dest's folder made; across filesystems a copy, then the
                                  source deleted -> 200 empty; 404 when the source is missing
    PUT /fs/set_file_permissions  {path, mode, owner?, group?}; owner and group must be the session's own
                                  ("session", "kernel", its name or id) -> 200 empty; 400 invalid_owner/invalid_group
    GET /fs/file_info?path=       follows links (as Go's os.Stat) -> FileInfo
    GET /fs/list_files?path=      one level, sorted by name, links as links (as Go's os.ReadDir) -> [FileInfo]
    GET /fs/read_file?path=       regular files only (else 400 not_a_regular_file) -> 200 application/octet-stream
                                  with Content-Length, streamed
    GET /fs/download_dir_zip?path=
                                  folders, regular files and links (stored as links); FIFOs, sockets and devices
                                  left out -> 200 application/zip, chunked, written as it goes
    PUT /fs/write_file?path=&mode=
                                  raw body with a Content-Length (else 411); mode default "644"; parents made
                                  -> 201 empty
    POST /fs/put_files            Content-Length required; a first line of JSON {"files": [{path, size, mode?}],
                                  "directories": [{path}]} and a newline, then each file's bytes in order (exactly
                                  `size` each) -> 201 empty; all or nothing
    POST /fs/watch                {path, recursive?} -> {watch_id}
    GET /fs/watch/{watch_id}/events
                                  Last-Event-ID optional -> SSE
    DELETE /fs/watch/{watch_id}   -> 204
    POST /process/exec            {command, args?, cwd?, env?, as_root?, as_user?, timeout_sec?} -> 200 JSON,
                                  trickled
    POST /process/spawn           exec's fields + allocate_tty?, cols?, rows? -> {process_id, pid, started_at}
    GET /process/{id}/status      -> {state: running or exited, exit_code, cpu_pct, mem_bytes}
    POST /process/{id}/stdin      {data_b64} -> {written_bytes}
    GET /process/{id}/stdout/stream
                                  Last-Event-ID optional -> SSE
    POST /process/{id}/kill       {signal: TERM, KILL, INT or HUP} -> {ok: true}
    POST /process/{id}/resize     {cols, rows} -> {ok: true}; 400 no_tty without a PTY

FileInfo is {name, path, is_dir, size_bytes (0 for folders), mod_time (RFC 3339, UTC, "Z"), mode}, `mode` as Go's
FileMode.String(): the type letters in Go's order (d, L for links, D device, p FIFO, S socket, u setuid, g setgid,
c character device, t sticky), or "-", then rwxrwxrwx: `-rw-r--r--`, `drwxr-xr-x`, `Lrwxrwxrwx`, `dtrwxrwxrwx`.

Writes (write_file, put_files): bytes whose total passes min(X-Lantern-Room, the free space of each filesystem
they go to) answer 413 {"code": "insufficient_room", "message": "... N bytes left", "room_bytes": N} before
anything is written; writes still in progress hold their bytes of the room until they end. Files are written
under temporary names in their own folders and renamed when all are whole; on any failure (a body cut short, a full
filesystem, a bad target, a rename) every temporary and every folder made for them is removed, and targets already
replaced get their old content back. No call holds a whole file in memory.

exec checks what it can first (4xx before anything runs: as_root -> 400 as_root_not_supported, another as_user,
a cwd that is not a folder, a command that cannot start -> 400 command_not_startable), then sends its 200 headers
at once, a space every 10 s while the process runs (leading whitespace is valid JSON, so a client's read timeout
never fires and it never resends an exec that ran), then {exit_code, stdout_b64, stderr_b64, duration_ms,
timed_out, stdout_truncated, stderr_truncated} (+ signal). SSE frames are `id: <n>` and `data: <json>`, with a
`: keep-alive` comment every 15 s; processes.py and watches.py say what their frames hold, their limits and
their buffers.
"""
