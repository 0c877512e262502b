"""Training: the only package (with `nmt.data.datamodule`) that imports Lightning.

fit: one run start to finish (Trainer, callbacks, model.pt, metrics.json, the final report).
lightning_module: `TranslationModule`, teacher forcing, validation loss and BLEU.
losses, schedules: label-smoothed (and R-Drop) losses; learning-rate schedules and Adam.
budget: fitting the schedule to the update count a time budget reaches.
averaging, selection: checkpoint averaging, and the choice of the weights in model.pt.
experiment_choice: the experiment that suits this machine when none is named.
"""
