"""Documents, not lines: sentences inside paragraphs, the shape of the text around them,
web pages and Word files."""
