"""Hugging Face transformers: our model exported as a `MarianMTModel` directory, and one
imported from it.

marian: the config, the weights (one permutation of the model dimension makes Marian's
    position table ours) and the search as a generation config.
model_dir: the exported directory (safetensors weights, MarianTokenizer files, generation
    config, model card), written whole or not at all.
model_card: the directory's README.md, what a Hub user expects to read.
marian_import: a MarianMTModel directory (OPUS-MT's, or our export) as our model.pt.
"""
