"""Projects of an organization, their limits, and the deprecated /projects routes."""
