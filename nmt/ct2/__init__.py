"""CTranslate2: our model exported as a CTranslate2 model directory, and translated with it.

spec: the trained Transformer as a `ctranslate2.specs.TransformerSpec`, weight by weight.
model_dir: the exported directory (CTranslate2's model.bin and vocabulary, our sentencepiece
    model and nmt.json with the direction and the search), written whole or not at all.
translator: translate raw lines with a model directory, with the contract of the torch path.
"""
