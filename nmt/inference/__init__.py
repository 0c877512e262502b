"""Inference: the engines that translate lines, behind one interface.

engine: `Engine` (the interface: translate, tokenizer, direction, stored search, card,
    describe, store_search) and `ModelCard` (a model described without its weights).
planner: lines -> encoded, length-sorted batches under a token budget (both engines).
torch_engine, ct2_engine: our PyTorch search; an exported CTranslate2 directory.
loading: `load(cfg)` -> the engine `backend=` names, checked; `read_card(cfg)`.
search_choice: the search a command runs (the model's own, changed by the command line).
output_text: n-best lists as output lines.
Callers never ask which engine they hold.
"""
