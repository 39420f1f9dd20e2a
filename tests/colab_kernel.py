"""A kernel whose shell shows tracebacks the way Colab's does, for protocol tests.

Colab's runtime runs its own ``Kernel`` subclass with a ``Shell`` that overrides
``_showtraceback`` to send the ``error`` message itself, with an ``error_details``
field of its own beside ``ename``, ``evalue`` and ``traceback``. Started with
``--IPKernelApp.kernel_class=colab_kernel.ColabKernel`` (``tests`` on the path).
"""

from __future__ import annotations

import sys
from typing import Any

from ipykernel.ipkernel import IPythonKernel
from ipykernel.jsonutil import json_clean
from ipykernel.zmqshell import ZMQInteractiveShell
from traitlets import Type


class ColabShell(ZMQInteractiveShell):
    """``_showtraceback`` as Colab's shell writes it: the error message plus details."""

    def _showtraceback(self, etype: Any, evalue: Any, stb: Any) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        content = {
            "traceback": stb,
            "ename": str(etype.__name__),
            "evalue": str(evalue),
            "error_details": {"colab": True},
        }
        dh = self.displayhook
        topic = dh.topic.replace(b"execute_result", b"error") if dh.topic else None
        dh.session.send(dh.pub_socket, "error", json_clean(content), dh.parent_header, ident=topic)
        self._last_traceback = stb


class ColabKernel(IPythonKernel):
    shell_class = Type(ColabShell)
