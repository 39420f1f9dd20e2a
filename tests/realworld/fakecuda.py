"""A CUDA device on a CPU-only build, for the real-library corpus.

Under :class:`~torch._subclasses.fake_tensor.FakeTensorMode` tensors may claim any
device, and PyTorch raises its genuine device errors when ``cuda:0`` and ``cpu``
tensors meet. Two moves do not work there on a CPU build: ``Tensor.to('cuda')``
(no index) and ``Module.to('cuda')`` (its parameters cannot be swapped); and a
DataLoader's iterator draws its seed with ``.item()``, which fake tensors refuse.
:func:`fake_cuda` patches both for the duration of a case: a bare ``cuda`` means
``cuda:0``, and a module moved to CUDA gets new parameters and buffers of the same
shape on ``cuda:0`` (without gradients: autograd on a CUDA tensor aborts a CPU
build, so the corpus runs under ``no_grad``). Nothing else changes: every other op is PyTorch's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn as nn

_CUDA = torch.device("cuda", 0)


def _cuda_index(device: Any) -> torch.device | None:
    """``cuda:0`` for any spelling of a CUDA device (``'cuda'``, ``0``), else None."""
    if device is None:
        return None
    if isinstance(device, int) and not isinstance(device, bool):
        return torch.device("cuda", device)
    try:
        parsed = torch.device(device)
    except (TypeError, RuntimeError):
        return None
    if parsed.type != "cuda":
        return None
    return torch.device("cuda", parsed.index or 0)


def _split_to_args(args: tuple, kwargs: dict) -> tuple[Any, tuple, dict]:
    """The device among ``Tensor.to``'s arguments, and the rest."""
    kwargs = dict(kwargs)
    if "device" in kwargs:
        return kwargs.pop("device"), args, kwargs
    if args and not isinstance(args[0], (torch.dtype, torch.Tensor)):
        return args[0], args[1:], kwargs
    return None, args, kwargs


def _move_module(module: nn.Module, device: Any, dtype: torch.dtype | None = None) -> nn.Module:
    """``module.to(device, dtype)`` by replacing its tensors with new ones of the same
    shape (fake tensors cannot be swapped in place)."""
    for sub in module.modules():
        for table in (sub._parameters, sub._buffers):
            for name, tensor in list(table.items()):
                if tensor is None:
                    continue
                new_device = device if device is not None else tensor.device
                new_dtype = (
                    dtype if dtype is not None and tensor.is_floating_point() else tensor.dtype
                )
                if tensor.device == new_device and tensor.dtype == new_dtype:
                    continue
                moved = torch.empty(tensor.shape, dtype=new_dtype, device=new_device)
                if table is sub._parameters:
                    moved = nn.Parameter(moved, requires_grad=False)
                table[name] = moved
    return module


def _is_fake_cuda(value: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(value, FakeTensor) and value.fake_device.type == "cuda"


def _shadow(value: Any) -> Any:
    """A fake CUDA tensor as a meta tensor of the same metadata (indices too)."""
    if isinstance(value, tuple):
        return tuple(_shadow(v) for v in value)
    if isinstance(value, list):
        return [_shadow(v) for v in value]
    if _is_fake_cuda(value):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    if isinstance(value, torch.Tensor) and value.device.type == "cpu":
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    return value


def _on_meta(module: nn.Module) -> bool:
    """A module with meta tensors: PyTorch's own ``to()`` raises its real error."""
    tensors = [*module.parameters(), *module.buffers()]
    return any(t.device.type == "meta" for t in tensors)


def _has_tensors(module: nn.Module) -> bool:
    return any(True for _ in module.parameters()) or any(True for _ in module.buffers())


@contextlib.contextmanager
def fake_cuda() -> Iterator[None]:
    """FakeTensorMode, with ``cuda`` moves that work on a CPU build (see module doc)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    tensor_to, tensor_cuda = torch.Tensor.to, torch.Tensor.cuda
    module_to, module_cuda = nn.Module.to, nn.Module.cuda

    def patched_tensor_to(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        device, rest, kw = _split_to_args(args, kwargs)
        cuda = _cuda_index(device)
        if cuda is not None:
            return tensor_to(self, cuda, *rest, **kw)
        return tensor_to(self, *args, **kwargs)

    def patched_tensor_cuda(self: torch.Tensor, device: Any = None, **kwargs: Any) -> Any:
        return tensor_to(self, _cuda_index(device if device is not None else 0))

    def patched_module_to(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        if _on_meta(self) or not _has_tensors(self):
            # PyTorch's own error or to_empty's work; a module without parameters or
            # buffers (a torchmetrics metric keeps states) moves through its own _apply
            return module_to(self, *args, **kwargs)
        device, rest, kw = _split_to_args(args, kwargs)
        cuda = _cuda_index(device)  # an int (accelerate's device maps) means cuda:N
        if cuda is not None:
            _, dtype, *_ = torch._C._nn._parse_to(*rest, **kw) if rest or kw else (None, None)
            return _move_module(self, cuda, dtype)
        _, dtype, *_ = torch._C._nn._parse_to(*args, **kwargs)
        return _move_module(self, torch.device(device) if device is not None else None, dtype)

    def patched_module_cuda(self: nn.Module, device: Any = None) -> nn.Module:
        if _on_meta(self):
            return module_to(self, "cuda")  # PyTorch's own error for a meta module
        return _move_module(self, _cuda_index(device if device is not None else 0))

    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    loader_init = _BaseDataLoaderIter.__init__

    def patched_loader_init(self: Any, loader: Any) -> None:
        with unset_fake_temporarily():  # it draws a real seed with .item()
            loader_init(self, loader)

    getitem, setitem = torch.Tensor.__getitem__, torch.Tensor.__setitem__

    # Python indexing takes a device guard, which a CPU build has none of for CUDA:
    # a fake CUDA tensor is indexed through a meta shadow of the same metadata.
    def patched_getitem(self: torch.Tensor, index: Any) -> Any:
        if not _is_fake_cuda(self):
            return getitem(self, index)
        result = getitem(_shadow(self), _shadow(index))
        return torch.empty_strided(
            result.shape, result.stride(), dtype=result.dtype, device=self.device
        )

    def patched_setitem(self: torch.Tensor, index: Any, value: Any) -> None:
        if not _is_fake_cuda(self):
            return setitem(self, index, value)
        if isinstance(value, torch.Tensor) and value.dim() and value.device != self.device:
            # what PyTorch says for a CUDA tensor assigned a tensor of another device
            value = self.new_empty(()) + value
        return setitem(_shadow(self), _shadow(index), _shadow(value))

    contiguous = torch.Tensor.contiguous

    def patched_contiguous(self: torch.Tensor, memory_format: Any = torch.contiguous_format) -> Any:
        if not _is_fake_cuda(self):
            return contiguous(self, memory_format=memory_format)
        if self.is_contiguous(memory_format=memory_format):
            return self
        return self.clone(memory_format=memory_format)

    invert = torch.Tensor.__invert__

    def patched_invert(self: torch.Tensor) -> Any:
        return torch.bitwise_not(self) if _is_fake_cuda(self) else invert(self)

    deepcopy = torch.Tensor.__deepcopy__

    def patched_deepcopy(self: torch.Tensor, memo: dict) -> Any:
        # a fake tensor's deepcopy swaps in a CPU storage (torchmetrics copies its states)
        if isinstance(self, FakeTensor) and type(self) is FakeTensor:
            return self.detach().clone()
        return deepcopy(self, memo)

    from torch._subclasses.fake_tensor import FakeTensor

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    torch.Tensor.__deepcopy__ = patched_deepcopy  # type: ignore[method-assign]
    torch.Tensor.contiguous = patched_contiguous  # type: ignore[method-assign]
    torch.Tensor.__invert__ = patched_invert  # type: ignore[method-assign]
    torch.Tensor.__getitem__ = patched_getitem  # type: ignore[method-assign,assignment]
    torch.Tensor.__setitem__ = patched_setitem  # type: ignore[method-assign,assignment]
    _BaseDataLoaderIter.__init__ = patched_loader_init  # type: ignore[method-assign]
    torch.Tensor.to, torch.Tensor.cuda = patched_tensor_to, patched_tensor_cuda
    nn.Module.to, nn.Module.cuda = patched_module_to, patched_module_cuda
    grad = torch.is_grad_enabled()
    # Autograd on a CUDA tensor aborts a CPU build's process: no gradients here.
    torch.set_grad_enabled(False)
    try:
        with mode:
            yield
    finally:
        torch.Tensor.to, torch.Tensor.cuda = tensor_to, tensor_cuda
        nn.Module.to, nn.Module.cuda = module_to, module_cuda
        _BaseDataLoaderIter.__init__ = loader_init  # type: ignore[method-assign]
        torch.Tensor.contiguous = contiguous  # type: ignore[method-assign]
        torch.Tensor.__invert__ = invert  # type: ignore[method-assign]
        torch.Tensor.__getitem__ = getitem  # type: ignore[method-assign]
        torch.Tensor.__setitem__ = setitem  # type: ignore[method-assign]
        torch.Tensor.__deepcopy__ = deepcopy  # type: ignore[method-assign]
        torch.set_grad_enabled(grad)
