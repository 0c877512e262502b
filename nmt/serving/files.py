"""POST /translate_file: a file of the format table (nmt.documents.formats: text, HTML, Word,
subtitles, EPUB, gettext) in (multipart, field `file`, optional fields `segment`,
`retranslate` (true or false: a .po or XLIFF file's translated messages done again; default
the server's retranslate=) and `api_key`), the same kind of file out, translated.

The door (door.py) reads the form (`read_file_form`), checks the file's job and counts its
text against the limits before this route runs; the route runs the checked job
through the server's dispatch (dispatch.py), so a file's texts are translated exactly as
the same texts sent to /translate, in the same batches and queue, and puts the file back
together. Refused in one line by the door: a type we do not read (415), a file over
max_file_bytes, a Word file or a book that would inflate past max_inflated_bytes or max_zip_ratio,
more than max_file_segments segments, a segment over max_line_chars, max_segment_words or
max_segment_tags (413), a file that cannot be read (422). Nothing is sent back until the
whole file is translated. The name it is sent back under keeps any script (RFC 6266's
`filename*`), with an ASCII `filename` beside it.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import UploadFile

from nmt.config import SEGMENTS
from nmt.decoding.settings import DecodeConfig
from nmt.documents.formats import FORMATS, of_file
from nmt.jobs.job import Job, JobError
from nmt.serving.dispatch import Dispatch
from nmt.serving.door import Asked, check_unicode, read_form
from nmt.terms.glossary import read_glossary
from nmt.terms.spans import Rules

SWITCH = {"true": True, "false": False}  # a form's yes or no

FORM = {  # the route's form, for the API's docs (the door reads it: read_file_form)
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "segment": {"type": "string", "enum": list(SEGMENTS)},
                        "retranslate": {"type": "string", "enum": list(SWITCH)},
                        "api_key": {"type": "string"},
                    },
                }
            }
        },
    }
}


async def read_file_form(
    body: bytes,
    content_type: str,
    server,
    protect: Rules,
    search: DecodeConfig,
    languages: tuple[str, str] | None = None,
) -> Asked:
    """The door's reader of /translate_file: the form's file as a Job, read with the
    `server`'s (a ServeConfig's) segmenting and its protected spans `protect` (checked once,
    as the server starts), searched (and priced) with the server's `search`. With
    `languages` (LibreTranslate's route: the model's source and target), the form's
    `source` (or "auto") and `target` must name them (else a 400)."""
    form = await read_form(body, content_type, max_files=1, status=422 if not languages else 400)
    try:
        if languages:
            source, target = form.get("source"), form.get("target")
            if source not in (languages[0], "auto") or target != languages[1]:
                raise JobError(
                    400, f"{source} to {target} is not available: {languages[0]} to {languages[1]}"
                )
        upload, segment = form.get("file"), form.get("segment")
        again = form.get("retranslate", "true" if server.retranslate else "false")
        if not isinstance(upload, UploadFile):
            raise JobError(422, "file: a file is required (multipart field `file`)")
        if segment is not None and not isinstance(segment, str):
            raise JobError(422, f"segment: {' or '.join(SEGMENTS)}")
        if not isinstance(again, str) or again.lower() not in SWITCH:
            raise JobError(422, "retranslate: true or false")
        name = upload.filename or ""
        check_unicode({"file name": name, "segment": segment, "api_key": form.get("api_key")}, 422)
        job = Job(
            search=search,
            data=await upload.read(),
            name=name,
            format=of_file(name).name,
            segment=segment or server.segment,
            protect=protect,
            glossary=read_glossary(server.glossary, server.glossary_exact)
            if server.glossary
            else None,
            retranslate=SWITCH[again.lower()],
        )
        key = form.get("api_key")
        return Asked(name, job, key if isinstance(key, str) else None)
    finally:
        await form.close()


def translated_name(name: str, target_lang: str) -> str:
    """The translated file's name: `<stem>.<target>.<suffix>`."""
    path = Path(name)
    return f"{path.stem or 'translation'}.{target_lang}{path.suffix.lower()}"


def disposition(name: str, target_lang: str) -> str:
    """Content-Disposition for the translated file: `translated_name`, as an ASCII
    `filename` (other characters dropped) and a UTF-8 `filename*` (RFC 6266)."""
    path = Path(name)
    stem, suffix = path.stem or "translation", path.suffix.lower()
    wanted = translated_name(name, target_lang)
    ascii_stem = (
        "".join(c for c in stem if c.isascii() and (c.isalnum() or c in "-_.")) or "translation"
    )
    return (
        f'attachment; filename="{ascii_stem}.{target_lang}{suffix}"; '
        f"filename*=UTF-8''{quote(wanted, safe='')}"
    )


def add_file_route(app: FastAPI, dispatch: Dispatch, target_lang: str) -> None:
    @app.post("/translate_file", openapi_extra=FORM)
    async def translate_file(request: Request) -> Response:
        """The file, translated: the same type, its shape, tags or formatting kept."""
        admitted = request.scope["nmt"]
        plan = admitted.plan
        try:
            result = await dispatch.run(plan, request.receive)
        except JobError as error:
            return JSONResponse({"detail": str(error)}, status_code=error.status)
        return Response(
            result.data,
            media_type=FORMATS[plan.job.format].media_type,
            headers={"Content-Disposition": disposition(admitted.request, target_lang)},
        )
