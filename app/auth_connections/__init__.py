"""Managed auth connections (/auth/connections): login flows that keep a profile logged in."""
