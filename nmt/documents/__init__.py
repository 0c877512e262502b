"""Documents, not lines: sentences inside paragraphs, the shape of the text around them,
web pages and Word files."""

# A file's format by its suffix: what translate's format=auto reads an input= as (any other
# suffix: text) and what the server's POST /translate_file takes.
FILE_FORMATS = {".txt": "text", ".md": "text", ".html": "html", ".htm": "html", ".docx": "docx"}
