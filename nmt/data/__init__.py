"""Parallel data, in the order it flows: load (sources), fit the tokenizer, encode and clean
(encoding), batch (batching), and the LightningDataModule over them (datamodule, the one
module here that imports Lightning). Import from the modules themselves."""
