"""The special ids every vocabulary of `nmt` gives its special pieces: the tokenizer trains
sentencepiece to use them, and the model, the batches and the searches rely on them."""

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
