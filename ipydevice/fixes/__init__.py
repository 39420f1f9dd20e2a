"""Stage 3, fix: ways out of a device error, and performing them.

``propose`` plans the moves and cell rewrites, ``source`` the edits to a class or
function, ``history`` the edits of earlier cells, ``apply`` performs a fix's steps by
reference (importing this package registers it as :meth:`ipydevice.Fix.apply`).
"""

from ipydevice.fixes import apply as apply
