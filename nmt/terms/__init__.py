"""What a translation must say as the caller wants it.

spans: protected spans (URLs, addresses, numbers, code, template variables, the caller's
    patterns) carried byte for byte through placeholders and the word alignment
glossary: a glossary file read, its terms found in a sentence in any inflection, and a term's
    use checked in a translation
lemmas: words' lemmas (simplemma), its dictionaries cached on disk as tries
annotation: terms written into the source for a model trained to read them (and training's
    view of them)
placing: the terms a translation lacks put in, the search continued from each (both engines)
"""
