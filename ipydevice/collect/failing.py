"""What the failing frames hold: the operands of the failing lines, the user's
locals, and the modules, optimizers and tensors passed through library frames.

Innermost first, then named from the user's namespace (the namespace is
searched in depth later, for the objects the report is about only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ipydevice import settings as _settings
from ipydevice.collect import probe
from ipydevice.collect.caches import cached_operands
from ipydevice.collect.compiled import failing_frames, is_compile_error, user_code_locations
from ipydevice.collect.frames import (
    FrameView,
    line_operands,
    method_receivers,
    moved_on_line,
    walk_frames,
)
from ipydevice.collect.namespace import code_names
from ipydevice.collect.roots import prefer_held_roots
from ipydevice.collect.scan import Scan
from ipydevice.collect.traced import add_traced_operands
from ipydevice.collect.wrapped import attach_sources

__all__ = ["collect", "failing_views"]


def failing_views(
    original: BaseException, framed: BaseException, exc: BaseException, max_frames: int
) -> tuple[list[FrameView], list[FrameView]]:
    """The frames of ``framed`` a diagnosis reads, each wrapped code's text attached
    (:mod:`ipydevice.collect.wrapped`); and, when a library re-raised the device error
    ``exc`` as its own (``raise ... from err``), the frames of the error the user got
    (``original``): the user's loops around the call are there."""
    views = attach_sources(failing_frames(original, framed, max_frames))
    around = walk_frames(original.__traceback__, max_frames) if original is not exc else []
    return views, around


def collect(
    views: list[FrameView],
    namespace: Mapping[str, Any],
    settings: _settings.Settings,
    original: BaseException | None = None,
    message: str = "",
) -> Scan:
    """Scans what the frames hold, innermost first, then names it from ``namespace``;
    for an error torch.compile raised (``original``, its ``message``), what the traced
    code read too."""
    scan = Scan(settings)
    scan.namespace = namespace
    # the cell's (or script's) top-level code first, then the functions it called
    codes = sorted((v for v in views if v.is_user), key=lambda v: not v.is_module_level)
    scan.read_names = code_names(v.frame.f_code for v in codes)
    user_indexes = [i for i, v in enumerate(views) if v.is_user]
    innermost_user = user_indexes[-1] if user_indexes else -1
    # The call that failed: the innermost frame, and the innermost module forward.
    forwards = [
        i for i, v in enumerate(views) if not v.is_user and v.frame.f_code.co_name == "forward"
    ]
    failing = {len(views) - 1, forwards[-1] if forwards else -1}
    chain = _module_chain(views)
    if len(chain) > 1:  # the model first: its layers' views are cut out of its own
        scan.prewalk(chain[0])
    for index in range(len(views) - 1, -1, -1):
        view = views[index]
        if view.is_user:
            _collect_user_frame(scan, view, index, innermost=index == innermost_user)
        elif index > innermost_user:
            _collect_library_frame(scan, view, consumed=index in failing)
    if views and not views[-1].is_user:
        scan.met = _met(views[-1])
        _add_met(scan, views[-1])
    scan.adopt_chain(chain)
    scan.name_from(namespace, deep=False)  # deeper names: engine.name_in_depth
    if original is not None and is_compile_error(original):
        add_traced_operands(scan, original, user_code_locations(message), namespace)
        scan.name_from(namespace, deep=False)
        prefer_held_roots(scan, namespace)
    return scan


def _add_met(scan: Scan, view: FrameView) -> None:
    """The tensors a library's own line met when it failed (``ema_p.mul_(...).add_(p)``
    in an EMA helper): operands, even where the frame is no module's ``forward`` nor a
    functional call; torch's own frames hold only temporaries."""
    if _is_torch(view) or view.frame.f_code.co_name == "forward" or _is_functional(view):
        return
    for text, value, _ in line_operands(view):
        if probe.is_tensor(value) and text.isidentifier():
            scan.add(value, (("local", text),), view.label, operand=True, on_line=True)


def _is_torch(view: FrameView) -> bool:
    name = view.summary.filename.replace("\\", "/")
    return "/torch/" in name or "/site-packages/torch" in name


def _met(view: FrameView) -> list[int]:
    """Ids of the tensors the failing library line read, in the line's order; of a
    list or tuple (a ``_foreach_`` op's operands), its first tensor: the one the op met
    first (``exp_avg_sq`` of ``_foreach_addcmul_(exp_avg_sq, grad, grad)``)."""
    met = []
    for _, value, _ in line_operands(view):
        if type(value) in (list, tuple) and value:
            value = value[0]
        if probe.is_tensor(value):
            met.append(id(value))
    return met


def _module_chain(views: list[FrameView]) -> list[Any]:
    """The modules the failing call ran through, outermost first (each once)."""
    chain: list[Any] = []
    for view in views:
        owner = view.self_object
        if owner is not None and probe.is_module(owner) and (not chain or chain[-1] is not owner):
            chain.append(owner)
    return chain


def _collect_user_frame(scan: Scan, view: FrameView, index: int, innermost: bool) -> None:
    receivers, moved = method_receivers(view), moved_on_line(view)
    for text, value, is_index in line_operands(view):
        path = (("local", text),)
        # An object only called on (``scheduler.add_noise(...)``) is on the line, but
        # its attributes are not what the call read: they do not inherit the flags.
        # A module's or an optimizer's method reads its own tensors (``opt.step()``
        # reads the state): those stay on the line.
        # A tensor read only through ``.to(device)`` (``x[:, :8].to(device)``): the call
        # got the moved copy, so it is no operand (nor on the line) wherever it is.
        read = text not in moved and (
            text not in receivers
            or probe.is_tensor(value)
            or probe.is_module(value)
            or probe.is_optimizer(value)
        )
        scan.add(
            value,
            path,
            view.label,
            on_line=read,
            operand=innermost and read,
            is_index=is_index,
            user=True,
            frame=index,
        )
    cached_operands(scan, view, index, innermost)
    owner = view.self_object
    if owner is not None:
        scan.add(owner, (("local", "self"),), view.label, user=True)
    for name, value in view.local_items(scan.settings.max_items):
        scan.add(value, (("local", name),), view.label, user=True)


def _collect_library_frame(scan: Scan, view: FrameView, consumed: bool = False) -> None:
    """Library frames add the module or optimizer they run and, for module
    ``forward`` and ``torch.nn.functional`` calls, the tensors passed in (those of
    the call that failed are ``consumed``); torch's deeper internals only hold
    temporaries the user never named."""
    owner = view.self_object
    if owner is not None and (probe.is_module(owner) or probe.is_optimizer(owner)):
        scan.add(owner, (("local", "self"),), view.label)
        if probe.is_module(owner) and view.frame.f_code.co_name != "forward":
            # Module._call_impl, transformers' output-capturing wrappers, accelerate's
            # hooks: they pass the call's arguments through (``kwargs in wrapper``)
            # and add nothing the forward frames do not show.
            return
    elif not _is_functional(view):
        return
    for name, value in view.arguments():
        if probe.is_a(value, (tuple, list)) and name in _varargs(view):
            items = tuple.__iter__(value) if probe.is_a(value, tuple) else list.__iter__(value)
            for index, item in zip(range(scan.settings.max_items), items, strict=False):
                if probe.is_tensor(item):
                    scan.add(
                        item,
                        (("local", f"{name}[{index}]"),),
                        view.label,
                        operand=True,
                        consumed=consumed,
                    )
        else:
            scan.add(value, (("local", name),), view.label, operand=True, consumed=consumed)


def _is_functional(view: FrameView) -> bool:
    # torch.nn.functional's arguments are the user's tensors; the optimizers'
    # are lists of lists of every parameter and state tensor (noise, not operands).
    return view.summary.filename.replace("\\", "/").endswith("/nn/functional.py")


def _varargs(view: FrameView) -> set[str]:
    code = view.frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    names = set()
    if code.co_flags & 0x04:
        names.add(code.co_varnames[count])
    return names
