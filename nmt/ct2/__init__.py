"""CTranslate2: our model exported as a CTranslate2 model directory.

spec: the trained Transformer as a `ctranslate2.specs.TransformerSpec`, weight by weight.
model_dir: the exported directory (CTranslate2's model.bin and vocabulary, our sentencepiece
    model and nmt.json with the direction and the search), written whole or not at all.
The engine that translates with such a directory is `nmt.inference.ct2_engine`.
"""
