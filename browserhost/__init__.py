"""The browser host: the process that owns each session's Chromium, and its building blocks."""
