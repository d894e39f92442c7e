"""Reproducing experiments (after Rex: record, replay, expdiff): a
command's apparatus -- every file it read, with its content, the digests
of what it wrote, its environment -- archived so that the command can be
replayed in a sandbox or compared with another one.

Nothing here is imported by the recorder unless a command asks for its
apparatus (see :mod:`shournal.reproduce.recording`).
"""
