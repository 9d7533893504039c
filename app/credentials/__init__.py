"""Credential providers (external password managers), stored credentials and TOTP codes."""
