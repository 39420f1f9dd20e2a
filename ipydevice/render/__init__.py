"""Renderers: a diagnosis or an inventory as text, HTML or a pandas table.

They take plain data (:mod:`ipydevice.model`) and return plain values; none of
them touches torch or IPython.
"""
