"""Report sections (Markdown/HTML) for the analyses in reports/analyses."""
