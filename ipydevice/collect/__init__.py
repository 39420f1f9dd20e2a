"""Stage 1, collect: what the failing frames and the namespace hold, as plain facts.

``frames`` walks a traceback, ``probe`` reads a tensor's metadata (never its data),
``scan`` turns objects into entries and rows, ``inventory`` collects ``%devices``' rows,
``compiled`` keeps torch.compile's frames out of the way, ``paths`` and
``namespace`` say where a user's names live.
"""
