"""The model card (README.md) of an exported Hugging Face directory.

What a Hub user looks for, from what the checkpoint and its evaluation.json know: the Hub's
metadata block (languages, task, library, data, scores), the model's shape, how to run it,
the data and the recipe it was trained with, the search it is meant to run with and how
generate carries it, and the test scores with their sacreBLEU signatures. Nothing is
invented: a field the checkpoint does not hold is left out or said to be unknown.
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version

from nmt.checkpoint import Checkpoint

LANGUAGES = {"en": "English", "de": "German"}


def model_card(
    checkpoint: Checkpoint, evaluation: dict | None, generation: dict, notes: list[str], dtype: str
) -> str:
    """The card's Markdown: `generation` is the exported generation config's fields, `notes`
    what it could not carry exactly (nmt.hf.marian.generation_settings)."""
    src, tgt = checkpoint.src_lang, checkpoint.tgt_lang
    direction = f"{LANGUAGES.get(src, src)}→{LANGUAGES.get(tgt, tgt)}"
    info, cfg = checkpoint.info, checkpoint.model.cfg
    data = (evaluation or {}).get("data", {}).get("name") or "unknown"
    parts = [
        front_matter(src, tgt, data, evaluation),
        f"# {info.get('experiment', 'nmt')}: {direction} translation\n",
        f"A Transformer encoder-decoder trained with nmt and exported "
        f"to `MarianMTModel` ({dtype} weights). It runs in `transformers` with no code of "
        f"nmt's; the conversion is exact (the same log-probabilities up to float rounding).\n",
        "## Model\n",
        table(
            ["", ""],
            ["layers (encoder + decoder)", f"{cfg.encoder_layers} + {cfg.decoder_layers}"],
            ["d_model / heads / FFN", f"{cfg.d_model} / {cfg.n_heads} / {cfg.d_ff}"],
            ["parameters", f"{sum(p.numel() for p in checkpoint.model.parameters()):,}"],
            ["vocabulary", f"{cfg.vocab_size} joint sentencepiece BPE pieces ({src} and {tgt})"],
            ["layer norm / activation", f"{cfg.norm}-norm / {cfg.activation}"],
            ["embeddings", "shared, and tied to the output" if cfg.tie_embeddings else "separate"],
            ["positions", f"sinusoidal, up to {cfg.max_positions}"],
        ),
        usage(),
        training(info, evaluation, data),
        search_section(checkpoint, generation, notes),
        scores_section(evaluation),
        "## Limitations\n",
        f"Trained on {data} only: expect it to do best on text like that data, and worse "
        "elsewhere. It translates one sentence per input; split documents first. The weights "
        "come with the terms of the data they were trained on.\n",
        f"Exported by nmt {nmt_version()}.\n",
    ]
    return "\n".join(parts)


def front_matter(src: str, tgt: str, data: str, evaluation: dict | None) -> str:
    """The Hub's YAML metadata (JSON values are valid YAML)."""
    meta = {
        "language": [src, tgt],
        "tags": ["translation", "marian", "nmt"],
        "library_name": "transformers",
        "pipeline_tag": "translation",
        "metrics": ["bleu", "chrf"],
    }
    if data != "unknown":
        meta["datasets"] = [data]
    lines = ["---"] + [f"{key}: {json.dumps(value)}" for key, value in meta.items()]
    test = split_scores(evaluation, "test")
    if test:
        result = {
            "task": {"type": "translation", "name": f"Translation {src}-{tgt}"},
            "dataset": {"type": data, "name": f"{data} {test['split']}"},
            "metrics": [
                {"type": "bleu", "value": round(test["bleu"], 2), "name": "BLEU"},
                {"type": "chrf", "value": round(test["chrf"], 2), "name": "chrF2"},
            ],
        }
        lines.append(f"model-index: {json.dumps([{'name': data, 'results': [result]}])}")
    return "\n".join(lines + ["---", ""])


def usage() -> str:
    return """## Use

```python
from transformers import MarianMTModel, MarianTokenizer

tokenizer = MarianTokenizer.from_pretrained("THIS_DIR")
model = MarianMTModel.from_pretrained("THIS_DIR")
batch = tokenizer(["A man is riding a bike."], return_tensors="pt", padding=True)
print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))
```

`generate` runs the search in `generation_config.json` (below); `num_beams=1` gives greedy
search, token for token what nmt's own greedy search gives (the tokenizer strips the text's
ends, nmt does not). With transformers 4.x,
`pipeline("translation", model="THIS_DIR")` works too (transformers 5 removed that pipeline).
The tokenizer's files are the sentencepiece model nmt trained, so ids are nmt's own.
"""


def training(info: dict, evaluation: dict | None, data: str) -> str:
    run = (evaluation or {}).get("training") or {}
    rows = [["data", data], ["experiment (nmt's config)", info.get("experiment", "unknown")]]
    steps = run.get("global_step", info.get("global_step"))
    if steps is not None:
        rows.append(["updates", f"{steps:,}"])
    if run.get("train_seconds"):
        rows.append(["training time", f"{run['train_seconds'] / 60:.0f} min"])
    if info.get("averaged"):
        rows.append(["weights", f"the average of the last {len(info['averaged'])} epochs'"])
    selection = run.get("selection") or {}
    if selection.get("chosen"):
        rows.append(["chosen on validation", selection["chosen"]])
    return "## Training\n\n" + table(["", ""], *rows)


def search_section(checkpoint: Checkpoint, generation: dict, notes: list[str]) -> str:
    search = checkpoint.search
    if search is None:
        ours = "none stored: greedy"
    elif search.strategy == "beam":
        ours = (
            f"beam {search.beam_size}, {search.length_norm} length penalty "
            f"{search.len_penalty or 0}, stop {search.stop}"
        )
    else:
        ours = search.strategy
    carried = ", ".join(
        f"{k}={generation[k]}"
        for k in ("num_beams", "length_penalty", "early_stopping", "do_sample", "max_new_tokens")
        if k in generation
    )
    lines = [
        "## Search\n",
        f"Chosen for this model on validation: {ours}. `generation_config.json` carries it as "
        f"{carried}.",
    ]
    if notes:
        lines.append("\nWhat generate cannot carry exactly:\n")
        lines += [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def scores_section(evaluation: dict | None) -> str:
    splits = (evaluation or {}).get("splits") or {}
    if not splits:
        return (
            "## Scores\n\nNo evaluation was found beside the checkpoint: run "
            "`python -m nmt.evaluate` and export again to put scores here.\n"
        )
    rows = [
        [
            role,
            s["split"],
            str(s["sentences"]),
            f"{s['bleu']:.2f}",
            f"{s['bleu_lowercase']:.2f}",
            f"{s['chrf']:.2f}",
        ]
        for role, s in splits.items()
    ]
    first = next(iter(splits.values()))
    backend = evaluation.get("backend", "nmt")
    return (
        "## Scores\n\n"
        + table(["", "split", "sentences", "BLEU", "BLEU (lowercased)", "chrF2"], *rows)
        + f"\nDecoded by nmt ({backend}) with the search above, detokenized output against "
        "the raw references. sacreBLEU signatures:\n\n"
        f"- BLEU: `{first['bleu_signature']}`\n"
        f"- BLEU (lowercased): `{first['bleu_lowercase_signature']}`\n"
        f"- chrF2: `{first['chrf_signature']}`\n"
    )


def split_scores(evaluation: dict | None, role: str) -> dict | None:
    return ((evaluation or {}).get("splits") or {}).get(role)


def table(header: list[str], *rows: list[str]) -> str:
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(row) + " |" for row in lines) + "\n"


def nmt_version() -> str:
    try:
        return version("nmt")
    except PackageNotFoundError:
        return "(not installed)"
