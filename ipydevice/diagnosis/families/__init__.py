"""The built-in error families, one file each, registered when this package is imported.

A family file holds everything ipydevice knows about one kind of device error: its
wordings, summary and advice, how it chooses the target device, its cell fix and
the objects whose audits explain it, as one :class:`~ipydevice.family.Family`
named ``FAMILY``. To add one, copy a small file (``numpy_conversion.py``), give it
a new ``ID`` and list it below; a family of your own outside the package registers
with :func:`ipydevice.plugins.family`.
"""

from ipydevice import registry
from ipydevice.diagnosis.families import (
    conv_type_mismatch,
    dataparallel,
    forked_cuda,
    generator_mismatch,
    hf_warning,
    index_mismatch,
    load_location,
    meta_device,
    mps,
    numpy_conversion,
    op_mismatch,
    optimizer_state,
    pin_memory,
    rnn_mismatch,
    xla,
)

BUILTIN = (
    op_mismatch.FAMILY,
    index_mismatch.FAMILY,
    conv_type_mismatch.FAMILY,
    rnn_mismatch.FAMILY,
    generator_mismatch.FAMILY,
    load_location.FAMILY,
    numpy_conversion.FAMILY,
    meta_device.FAMILY,
    dataparallel.FAMILY,
    optimizer_state.FAMILY,
    mps.FAMILY,
    hf_warning.FAMILY,
    xla.FAMILY,
    forked_cuda.FAMILY,
    pin_memory.FAMILY,
)

for _family in BUILTIN:
    registry.add_family(_family)
