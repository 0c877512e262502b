"""The translation wing: texts in, one Translation per text out, on any engine (texts.py).
A sentence is one record (sentence.py) that the steps fill in the order data flows:
prepare.py, search.py, finish.py, join.py."""
