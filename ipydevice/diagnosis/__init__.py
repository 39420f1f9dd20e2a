"""Stage 2, diagnose: recognise the error, analyse who is on the wrong device.

``recognise`` turns an exception's text into facts, ``families/`` holds one file per
kind of device error, ``unwrap/`` one per wrapping exception, ``culprits`` names the
objects off the target device (:mod:`ipydevice.pipeline.engine` runs the stages).
"""
