"""Serving a model over HTTP (`python -m nmt.serve`): LitServe around our backends.

door: what every translating request passes first (its body read once, bounded; its job
checked against the limits; keys and rate limits: access.py); schema: the request and
response JSON of /translate and a request's search; dispatch: a checked plan's texts sent
to the model's workers, from every route alike; api: the LitServe API that batches works
into the backend; files and libretranslate: the other doors; server: the LitServer (or
inprocess.py's, for CTranslate2) with /translate, /health, /info and the page at /.
"""
