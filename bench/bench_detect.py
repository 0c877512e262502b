"""Which language identifier answers the LibreTranslate API's POST /detect (#42): py3langid
against lingua, each restricted to the model's two languages, on Multi30k's val sentences
(English and German, 2,028) and on their first two words alone (short queries).

    python bench/bench_detect.py
"""

from __future__ import annotations

import time

from common import read_lines, save_records


def main() -> None:
    from lingua import Language, LanguageDetectorBuilder
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    texts = [(s, "en") for s in read_lines("val.en")] + [(s, "de") for s in read_lines("val.de")]
    short = [(" ".join(s.split()[:2]), lang) for s, lang in texts]
    langid = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    langid.set_languages(["en", "de"])
    lingua = LanguageDetectorBuilder.from_languages(Language.ENGLISH, Language.GERMAN).build()
    codes = {Language.ENGLISH: "en", Language.GERMAN: "de"}
    identifiers = {
        "py3langid": lambda s: langid.classify(s)[0],
        "lingua": lambda s: codes.get(lingua.detect_language_of(s), "?"),
    }
    records = []
    for name, identify in identifiers.items():
        for label, data in (("sentences", texts), ("first two words", short)):
            start = time.perf_counter()
            right = sum(identify(text) == lang for text, lang in data)
            rate = len(data) / (time.perf_counter() - start)
            print(
                f"{name:10s} {label:16s} accuracy {right / len(data):.4f} "
                f"({right}/{len(data)})  {rate:,.0f} texts/s"
            )
            records.append(
                {
                    "name": f"detect/{name}/{label.replace(' ', '_')}",
                    "accuracy": right / len(data),
                    "texts_per_s": rate,
                }
            )
    save_records(records, "detect")


if __name__ == "__main__":
    main()
