"""Reproducing experiments (after Rex: replay, rerun, expdiff) from a
command's apparatus, which :mod:`shournal.capture.apparatus` records and
:mod:`shournal.store.archive` keeps."""
