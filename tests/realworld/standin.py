"""A second device *with data* on a CPU-only build, for the real-library corpus.

:func:`fakecuda.fake_cuda` gives PyTorch's genuine device errors without a GPU, but its
tensors have no data: a case whose fix copies a tensor's values to the CPU, or whose
library reads values before the model runs, cannot run there. :func:`standin` gives a
device that computes for real: PyTorch's ``PrivateUse1`` backend set up from Python
(``torch.utils.backend_registration``) and renamed ``openreg``, the name of PyTorch's
own reference out-of-tree backend (OpenReg, a device whose memory is CPU memory too).
A case on it says which GPU of its report ``openreg:0`` stands for.

* Every ``openreg`` storage has a CPU storage holding its bytes, found by the storage
  (its ``_cdata``): views, ``detach()``, ``nn.Parameter`` and ``Module.to`` share the
  data because they share the storage, and the bytes go with the storage. Its
  ``data_ptr()`` is the address of those bytes.
* One boxed fallback for the ``PrivateUse1`` key runs every operator that has no kernel
  of its own on CPU views of those bytes: a view comes back as a view of the same
  storage, an in-place or ``out=`` operator returns its argument (re-pointed if the
  CPU kernel resized it), and a factory operator with ``device='openreg'`` allocates
  here. ``_copy_from`` moves bytes between the devices, so ``.to('cpu')``, ``.cpu()``,
  ``.item()``, ``bool()`` and printing read the real values.
* PyTorch's composite kernels (``_pack_padded_sequence``, ``embedding``, ``_to_copy``)
  run as they are (a convolution reaches ``convolution_overrideable``, which runs
  ``convolution`` on the CPU views), with their own checks and messages. Where an ``openreg`` and a CPU
  tensor meet in an operator that reaches the fallback (a CPU kernel would not check
  them), the fallback raises what PyTorch's device checks raise: TensorIterator's
  "found at least two devices, openreg:0 and cpu!" for pointwise operators, the
  generated wrappers' "got index is on openreg:0, different from other tensors on cpu"
  for the others, indexing's "indices should be either on cpu or on the same device as
  the indexed tensor (cpu)", a kernel's "Expected a 'openreg' device type for generator
  but found 'cpu'". 0-dim CPU tensors mix (as in TensorIterator; the wrappers are
  stricter), and indexing takes CPU indices, as on CUDA.
* ``torch.UntypedStorage(n, device='openreg')`` (a storage's ``clone()``, so
  ``copy.deepcopy``; ``torch.load``) allocates here too: torch has no allocator for a
  Python backend and would crash.

Left out: autocast, pinned memory, a device generator, a second ``openreg`` device,
streams. The backend's name is set once per process (torch cannot rename it back) and
the kernels stay registered: they only ever see ``openreg`` tensors. The device is
*available* (``torch.accelerator.is_available()``, ``torch.openreg.is_available()``)
only inside :func:`standin`, so the cases that run after it in the same process see a
CPU-only machine again.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import torch

NAME = "openreg"
#: The device (it prints as ``openreg:0`` once PrivateUse1 is renamed).
DEVICE = torch.device("privateuseone", 0)

_CPU = torch.device("cpu")
_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_SET = torch.ops.aten.set_.source_Storage_storage_offset

#: The CPU bytes of each openreg storage (by the openreg storage's ``_cdata``).
_DATA: dict[int, torch.UntypedStorage] = {}
#: The openreg storage of each CPU storage (by the CPU storage's ``_cdata``).
_OWNER: dict[int, weakref.ref] = {}
_LIBRARIES: list[torch.library.Library] = []
_ACTIVE = [0]  # how many standin() contexts are open

#: Indexing, whose kernel checks its indices itself.
_INDEX = frozenset({"aten::index.Tensor", "aten::index.Tensor_out"})
#: Operators whose ``indices`` may stay on the CPU (CUDA's indexing allows it).
_CPU_INDICES = frozenset(
    {
        "aten::index.Tensor",
        "aten::index.Tensor_out",
        "aten::index_put_",
        "aten::index_put",
        "aten::_index_put_impl_",
    }
)


def is_standin(value: Any) -> bool:
    """An ``openreg`` tensor."""
    return isinstance(value, torch.Tensor) and value.device.type == NAME


# -- storage ---------------------------------------------------------------------------------


def _forget(standin_key: int, cpu_key: int) -> None:
    _DATA.pop(standin_key, None)
    ref = _OWNER.get(cpu_key)
    if ref is not None and ref() is None:
        del _OWNER[cpu_key]


def _storage_for(cpu: torch.UntypedStorage) -> torch.UntypedStorage:
    """The openreg storage whose bytes are ``cpu``'s: made on first sight, and made
    again when a CPU kernel has grown ``cpu`` past it."""
    ref = _OWNER.get(cpu._cdata)
    storage = ref() if ref is not None else None
    if storage is not None and storage.nbytes() >= cpu.nbytes():
        return storage
    storage = torch._C._construct_storage_from_data_pointer(cpu.data_ptr(), DEVICE, cpu.nbytes())
    _DATA[storage._cdata] = cpu
    _OWNER[cpu._cdata] = weakref.ref(storage)
    # torch keeps a storage's Python object while the storage lives: the finalizer runs
    # when the last tensor on it goes
    weakref.finalize(storage, _forget, storage._cdata, cpu._cdata).atexit = False
    return storage


def _point(tensor: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """The openreg ``tensor`` made to view ``like``'s bytes with ``like``'s layout (the
    CPU kernel of ``set_`` only sets metadata)."""
    storage = _storage_for(like.untyped_storage())
    _SET.redispatch(_CPU_KEYS, tensor, storage, like.storage_offset(), like.shape, like.stride())
    return tensor


def to_standin(cpu: torch.Tensor) -> torch.Tensor:
    """An openreg tensor over ``cpu``'s bytes (the same layout; writes go through)."""
    return _point(torch._C._acc.create_empty_tensor((0,), cpu.dtype), cpu)


def to_cpu(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU view of an openreg tensor's bytes (the same layout; writes go through)."""
    storage = tensor.untyped_storage()
    cpu = _DATA.get(storage._cdata)
    if cpu is None:
        if storage.nbytes() == 0:
            return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype)
        raise RuntimeError(f"an {NAME} tensor without data (not made by standin.py)")
    view = torch.empty(0, dtype=tensor.dtype)
    view.set_(cpu, tensor.storage_offset(), tensor.shape, tensor.stride())
    return view


_STORAGE_NEW = torch.UntypedStorage.__new__


def _new_storage(cls: type, *args: Any, device: Any = None, **kwargs: Any) -> Any:
    """``torch.UntypedStorage(..., device='openreg')``: CPU bytes, paired here."""
    if device is not None and torch.device(device).type == NAME:
        return _storage_for(_STORAGE_NEW(cls, *args, **kwargs))
    if device is not None:
        kwargs["device"] = device
    return _STORAGE_NEW(cls, *args, **kwargs)


# -- kernels ---------------------------------------------------------------------------------


def _unwrap(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return to_cpu(value) if value.device.type == NAME else value
    if isinstance(value, torch.device):
        return _CPU if value.type == NAME else value
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    return value


def _wrap(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value if is_standin(value) else to_standin(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_wrap(v) for v in value)
    return value


def _qualified(op: Any) -> str:
    name = op._schema.name
    return name if op._overloadname == "default" else f"{name}.{op._overloadname}"


def _device_error(op: Any, args: tuple, kwargs: dict) -> RuntimeError | None:
    """PyTorch's own words where tensors of two devices meet (see the module doc)."""
    qualified = _qualified(op)
    if qualified in _INDEX and isinstance(args[1], (list, tuple)):  # the kernel's own check
        indexed = args[0]
        devices = {i.device.type for i in args[1] if i is not None} - {"cpu", indexed.device.type}
        if devices:
            return RuntimeError(
                "indices should be either on cpu or on the same device as the indexed tensor "
                f"({indexed.device})"
            )
    generator = kwargs.get("generator")
    if isinstance(generator, torch.Generator) and generator.device.type != NAME:
        return RuntimeError(
            f"Expected a '{NAME}' device type for generator but found '{generator.device.type}'"
        )
    names = [a.name for a in op._schema.arguments]
    named: list[tuple[str, torch.Tensor]] = []
    for name, value in [*zip(names, args, strict=False), *kwargs.items()]:
        items = value if isinstance(value, (list, tuple)) else (value,)
        named.extend((name, v) for v in items if isinstance(v, torch.Tensor))
    indices_on_cpu = qualified in _CPU_INDICES
    named = [
        (name, t)
        for name, t in named
        if t.device.type != "cpu" or (t.dim() and not (indices_on_cpu and name == "indices"))
    ]
    if torch.Tag.pointwise in op.tags:  # TensorIterator: the first device not the CPU
        common = next((t.device for _, t in named if t.device.type != "cpu"), None)
        other = next((t.device for _, t in named if t.device != common), None)
        if common is None or other is None:
            return None
        return RuntimeError(
            "Expected all tensors to be on the same device, but found at least two "
            f"devices, {common} and {other}!"
        )
    common = named[0][1].device if named else None
    for name, tensor in named[1:]:
        if tensor.device != common:
            overload = "" if op._overloadname == "default" else op._overloadname
            method = f"wrapper_PrivateUse1_{overload}_{op._schema.name.split('::')[-1]}"
            return RuntimeError(
                f"Expected all tensors to be on the same device, but got {name} is on "
                f"{tensor.device}, different from other tensors on {common} (when "
                f"checking argument in method {method})"
            )
    return None


def _moved(standin: torch.Tensor, cpu: torch.Tensor) -> bool:
    """Whether a CPU kernel resized or re-pointed the CPU view of ``standin``."""
    if cpu.shape != standin.shape or cpu.stride() != standin.stride():
        return True
    if cpu.storage_offset() != standin.storage_offset():
        return True
    bytes_ = cpu.untyped_storage()
    owned = _DATA.get(standin.untyped_storage()._cdata)
    return (
        owned is None
        or owned._cdata != bytes_._cdata
        or bytes_.nbytes() > standin.untyped_storage().nbytes()
    )


def _fallback(op: Any, *args: Any, **kwargs: Any) -> Any:
    """Every operator without a kernel here: run on the CPU views (module doc)."""
    __tracebackhide__ = True  # (C++ in torch: tracebacks and diagnoses skip this frame)
    error = _device_error(op, args, kwargs)
    if error is not None:
        # torch raises this in C++, under the call: no frame of this file may hold the
        # tensors, nor torch's operator (a diagnosis reads the traceback's frames)
        del args, kwargs, op
        raise error
    cpu_args, cpu_kwargs = _unwrap(args), {k: _unwrap(v) for k, v in kwargs.items()}
    result = op(*cpu_args, **cpu_kwargs)
    schema = op._schema
    written: dict[frozenset, Any] = {}  # the arguments written to, by alias set
    for i, argument in enumerate(schema.arguments):
        info = argument.alias_info
        if info is None or not info.is_write:
            continue
        if i < len(args):
            original, cpu = args[i], cpu_args[i]
        elif argument.name in kwargs:
            original, cpu = kwargs[argument.name], cpu_kwargs[argument.name]
        else:
            continue
        many = isinstance(original, (list, tuple))
        for o, c in zip(original if many else (original,), cpu if many else (cpu,), strict=True):
            if is_standin(o) and _moved(o, c):
                _point(o, c)  # resized by the CPU kernel (an out= argument)
        written[frozenset(info.before_set)] = original
    returns = schema.returns
    if not returns:
        return None
    values = result if len(returns) > 1 else (result,)
    out = []
    for ret, value in zip(returns, values, strict=True):
        info = ret.alias_info
        if info is not None and info.is_write and frozenset(info.before_set) in written:
            out.append(written[frozenset(info.before_set)])  # the argument itself
        else:
            out.append(_wrap(value))  # new, or a view of an openreg storage
    return tuple(out) if len(returns) > 1 else out[0]


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    _unwrap(dst).copy_(_unwrap(src))
    return dst


def _copy_from_and_resize(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    cpu = _unwrap(dst)
    cpu.resize_(src.shape)
    cpu.copy_(_unwrap(src))
    if is_standin(dst) and _moved(dst, cpu):
        _point(dst, cpu)
    return dst


def _convolution(*args: Any) -> Any:
    """``convolution_overrideable``, where a backend without kernels of its own lands
    (PyTorch's default raises): ``convolution`` on the CPU views, devices checked."""
    return _fallback(torch.ops.aten.convolution.default, *args)


def _set_storage(
    tensor: torch.Tensor,
    source: torch.UntypedStorage,
    storage_offset: int = 0,
    size: Any = None,
    stride: Any = (),
) -> torch.Tensor:
    """``set_`` to a storage: metadata only (torch's CPU kernel does just that)."""
    if size is None:
        size, stride = (source.nbytes() // tensor.element_size(),), (1,)
    return _SET.redispatch(_CPU_KEYS, tensor, source, storage_offset, size, stride)


# -- set-up ----------------------------------------------------------------------------------


class _Module:
    """``torch.openreg``: one device, available inside :func:`standin` only."""

    @staticmethod
    def is_available() -> bool:
        return _ACTIVE[0] > 0

    @staticmethod
    def is_initialized() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return False

    @staticmethod
    def manual_seed_all(seed: int) -> None:
        return None

    @staticmethod
    def device(device: Any) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()  # one device: nothing to switch


class _Hooks(torch._C._acc.PrivateUse1Hooks):
    def is_available(self) -> bool:
        return _ACTIVE[0] > 0

    def has_primary_context(self, dev_id: int) -> bool:
        return True

    def is_built(self) -> bool:
        return True


def install() -> None:
    """Sets the openreg device up, once per process (see the module doc)."""
    if _LIBRARIES:
        return
    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", NAME):
        raise RuntimeError(f"PrivateUse1 is already the {name!r} backend in this process")
    if name != NAME:
        from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

        _setup_privateuseone_for_python_backend(NAME, backend_module=_Module(), hook=_Hooks())
    kernels = torch.library.Library("aten", "IMPL")
    kernels.impl("_copy_from", _copy_from, "PrivateUse1")
    kernels.impl("_copy_from_and_resize", _copy_from_and_resize, "PrivateUse1")
    kernels.impl("convolution_overrideable", _convolution, "PrivateUse1")
    kernels.impl("set_.source_Storage", _set_storage, "PrivateUse1")
    kernels.impl("set_.source_Storage_storage_offset", _set_storage, "PrivateUse1")
    fallback = torch.library.Library("_", "IMPL")
    fallback.fallback(_fallback, "PrivateUse1")
    torch.UntypedStorage.__new__ = staticmethod(_new_storage)  # type: ignore[method-assign,assignment]
    _LIBRARIES.extend((kernels, fallback))


@contextlib.contextmanager
def standin() -> Iterator[None]:
    """The openreg device, available for the duration of a case."""
    install()
    _ACTIVE[0] += 1
    try:
        yield
    finally:
        _ACTIVE[0] -= 1
