"""Browser profiles: named, stored browser state (cookies and local storage)."""
