"""The pipeline above the stages: it runs them, and nothing below imports it.

``engine`` turns an exception into a :class:`~ipydevice.model.Diagnosis`
(:func:`ipydevice.diagnose`): unwrap, recognise, collect, analyse, fix, audit,
snapshot. ``remote`` merges the blocks of errors other processes raised,
``live_warning`` diagnoses a device warning from the live stack, ``inventory``
is ``%devices``: the namespace collected, then audited.
"""
