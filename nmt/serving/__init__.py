"""Serving a model over HTTP (`python -m nmt.serve`): LitServe around our backends.

door: what every translating request passes first (its body read once, bounded; its job
checked against the limits; keys and rate limits: access.py); schema: the request and
response JSON of /translate and a request's search; api: the LitServe API that batches
requests into the backend and runs them as jobs (nmt.jobs); files and libretranslate: the
other doors, which run their checked jobs through the server's Submit (submit.py); server:
the LitServer (or inprocess.py's, for CTranslate2) with /health, /info and the page at /.
"""
