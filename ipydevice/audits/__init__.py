"""Stage 4, audit: causes of device errors visible before anything fails.

``checkup`` runs them (``ipydevice.check()``, ``%devices`` and the error panel).
"""
