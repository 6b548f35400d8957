"""The workflow language: definition models, expressions, scripts, durations, retry
delays, validation and loading definition files. Pure: no I/O beyond reading files in
:mod:`engine.language.loading`."""
