"""Which language identifier answers the LibreTranslate API's POST /detect (#42): py3langid
against lingua, each restricted to the model's two languages, on Multi30k's val sentences
(English and German, 2,028) and on their first two words alone (short queries). Accuracy of
each; speed in rounds that alternate the two (bench/harness.py), each warmed up first, lingua
with its models preloaded (it loads them lazily, on its first call, otherwise).

    python bench/bench_detect.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics

from common import read_lines, save_records
from harness import Run, Side, alternate


def main() -> None:
    from lingua import Language, LanguageDetectorBuilder
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    texts = [(s, "en") for s in read_lines("val.en")] + [(s, "de") for s in read_lines("val.de")]
    short = [(" ".join(s.split()[:2]), lang) for s, lang in texts]
    langid = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    langid.set_languages(["en", "de"])
    lingua = (
        LanguageDetectorBuilder.from_languages(Language.ENGLISH, Language.GERMAN)
        .with_preloaded_language_models()
        .build()
    )
    codes = {Language.ENGLISH: "en", Language.GERMAN: "de"}
    identifiers = {
        "py3langid": lambda s: langid.classify(s)[0],
        "lingua": lambda s: codes.get(lingua.detect_language_of(s), "?"),
    }
    records = []
    for label, data in (("sentences", texts), ("first two words", short)):
        accuracy = {}

        def side(name: str, identify, data=data, accuracy=accuracy) -> Side:
            def run() -> Run:
                found = [identify(text) for text, _ in data]
                accuracy[name] = sum(f == lang for f, (_, lang) in zip(found, data, strict=True))
                return Run(len(data), None, found)

            return Side(name, "en, de", run)

        sides = [side(name, identify) for name, identify in identifiers.items()]
        timings = alternate(sides, "texts/s", args.rounds, same_work=False)
        ratio = timings.ratio("py3langid", "lingua", f"detect/{label.replace(' ', '_')}")
        for name in identifiers:
            right = accuracy[name]
            rate = statistics.median(timings.rates[name])
            print(
                f"{name:10s} {label:16s} accuracy {right / len(data):.4f} ({right}/{len(data)})"
                f"  {rate:,.0f} texts/s"
            )
        print(f"  {ratio.line()}", flush=True)
        records.append(
            ratio.record()
            | {f"accuracy_{name}": accuracy[name] / len(data) for name in identifiers}
        )
    save_records(records, "detect")


if __name__ == "__main__":
    main()
