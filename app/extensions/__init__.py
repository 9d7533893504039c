"""Browser extensions: ZIP archives uploaded once and loaded into browser sessions."""
