"""Serving a model over HTTP (`python -m nmt.serve`): LitServe around our backends.

schema: the request and response JSON and a request's search; gate: the checks every request
passes before it is queued; api: the LitServe API that batches requests into the backend;
server: the LitServer with /health, /info and the page at / (page.html).
"""
