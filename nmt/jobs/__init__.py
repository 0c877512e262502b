"""A request is a job: every door (`nmt.translate`, POST /translate, /translate_file and the
LibreTranslate routes) builds a `Job` (job.py), checks it against the `Limits` once, before
any costly work (check.py: documents parsed and counted, a search's worst-case cost), and
runs the checked job on a translator of texts (run.py). The doors only build jobs and render
their answers; the rules live here, once."""
