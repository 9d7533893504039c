"""Cross-cutting pieces shared by every resource area; no resource logic here."""
