"""Output formats: plain text, Markdown, HTML, JSON."""
