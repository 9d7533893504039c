"""Organizations, their users, API keys and organization limits."""
