"""Where another process's diagnosis may come from: a fix only from the payload sent
with the exception, never from text shaped like ipydevice's note; and a payload
bounded where it arrives."""

from __future__ import annotations

import json
import time

import pytest

import ipydevice
from ipydevice.diagnosis import carried

torch = pytest.importorskip("torch")

MESSAGE = (
    "Expected all tensors to be on the same device, but found at least two devices, cpu and meta!"
)
FORGED_NOTE = """ipydevice (DataLoader worker 0): `x` is on cpu
  culprit: `x` on cpu, should be on meta
  fix: move `x` to meta
    __import__('os').system('echo forged')"""


def _worker_text(note: str, prefix: str = "") -> str:
    """A worker's traceback as text, whose error message holds lines shaped like a note
    (a Dataset that raises with text it read from a file, say)."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/data/ds.py", line 9, in __getitem__',
        "    return self.proj(row)",
        f"RuntimeError: {MESSAGE}",
        *note.splitlines(),
    ]
    return "\n".join(prefix + line for line in lines)


def _code_of(d) -> str:
    return "\n".join(f.code + f.title for f in d.fixes)


class ExceptionWrapper:
    """As torch.utils.data's: the worker's error crosses as text, re-raised here."""

    def __init__(self, text: str) -> None:
        self.exc_msg = text

    def reraise(self) -> None:
        raise RuntimeError(
            f"Caught RuntimeError in DataLoader worker process 0.\nOriginal {self.exc_msg}"
        )


def _reraised(wrapper: ExceptionWrapper) -> RuntimeError:
    try:
        wrapper.reraise()
    except RuntimeError as exc:
        return exc
    raise AssertionError


def test_a_note_in_a_workers_message_is_never_a_fix() -> None:
    exc = _reraised(ExceptionWrapper(_worker_text(FORGED_NOTE)))
    d = ipydevice.diagnose(exc, namespace={"x": torch.randn(2)})
    assert d.is_device_error and d.failing_module.startswith("DataLoader worker 0")
    assert "__import__" not in _code_of(d) and "(from DataLoader worker 0)" not in _code_of(d)
    # the text is shown as the worker's words: its culprit, its fix's title, no code
    assert [c.name for c in d.culprits] == ["x"] and "traceback's text says" in d.culprits[0].why
    assert any("suggests: move `x` to meta" in n and "not offered as code" in n for n in d.notes)
    assert "__import__" not in str(d)


@pytest.mark.parametrize("prefix", ["[rank1]: ", "    ", ""])
def test_a_note_in_a_ranks_text_is_never_a_fix(prefix: str) -> None:
    """A variation: torchrun's ChildFailedError and torch.multiprocessing.spawn, a
    launcher's prefix on every line, a source fix's location and code."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
    from torch.multiprocessing.spawn import ProcessRaisedException

    note = FORGED_NOTE.replace("DataLoader worker 0", "rank 1/2").replace(
        "  fix: move `x` to meta", "  fix: change the code [at train.py:3]"
    )
    text = _worker_text(note, prefix)
    failure = ProcessFailure.__new__(ProcessFailure)
    failure.__dict__.update(
        local_rank=1,
        pid=1,
        exitcode=1,
        error_file="<none>",
        timestamp=0,
        message={
            "message": f"RuntimeError: {MESSAGE}",
            "extraInfo": {"py_callstack": text, "timestamp": "0"},
        },
    )
    elastic = ChildFailedError("train.py", {1: failure})
    spawned = ProcessRaisedException(
        f"\n\n-- Process 1 terminated with the following error:\n{text}", 1, 4242
    )
    for exc in (elastic, spawned):
        d = ipydevice.diagnose(exc, namespace={})
        assert d.is_device_error, exc
        assert "__import__" not in _code_of(d) and "train.py" not in _code_of(d)
        assert any("suggests: change the code" in n for n in d.notes), d.notes


def _sent_payload() -> dict:
    """A real payload, as a worker diagnosing its own error attaches it."""
    model = torch.nn.Linear(4, 2).to("meta")
    batch = torch.randn(3, 4)
    with pytest.raises(RuntimeError) as caught:
        model(batch)
    exc = caught.value
    assert carried.attach(exc, ipydevice.diagnose(exc, namespace={}), "DataLoader worker 0")
    return vars(exc)[carried.ATTRIBUTE]


def test_the_payload_sent_with_a_dataloader_workers_error_gives_its_fix() -> None:
    """ipydevice.worker_init_fn puts the payload on the ExceptionWrapper the worker
    sends; the re-raised text then holds the note too, read as words only."""
    sent = _sent_payload()
    wrapper = ExceptionWrapper(_worker_text(carried.note_text(sent)))
    setattr(wrapper, carried.ATTRIBUTE, sent)
    d = ipydevice.diagnose(_reraised(wrapper), namespace={})
    assert d.fixes and d.fixes[0].title.endswith("(from DataLoader worker 0)")
    assert d.fixes[0].code == sent["fix"]["code"] and not d.fixes[0].steps
    assert not any("suggests:" in n for n in d.notes)
    # a forged note beside a real payload: the payload's fix, the text's ignored
    forged = ExceptionWrapper(_worker_text(FORGED_NOTE))
    setattr(forged, carried.ATTRIBUTE, sent)
    d = ipydevice.diagnose(_reraised(forged), namespace={})
    assert "__import__" not in _code_of(d) and d.fixes[0].code == sent["fix"]["code"]


def test_the_error_file_carries_the_payload_beside_the_text(monkeypatch, tmp_path) -> None:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    from ipydevice.integrations import excepthook

    path = tmp_path / "error.json"
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    sent = _sent_payload()
    exc = RuntimeError(MESSAGE)
    setattr(exc, carried.ATTRIBUTE, sent)
    excepthook.write_error_file(exc, "REPORT")
    assert json.loads(path.read_text())["message"]["extraInfo"]["ipydevice"]["fix"]
    failure = ProcessFailure(local_rank=1, pid=1, exitcode=1, error_file=str(path))
    d = ipydevice.diagnose(ChildFailedError("train.py", {1: failure}), namespace={})
    assert d.fixes and d.fixes[0].code == sent["fix"]["code"]


# -- bounds on what arrives ------------------------------------------------------------------


def _carrying(data: dict) -> RuntimeError:
    exc = RuntimeError(MESSAGE)
    setattr(exc, carried.ATTRIBUTE, data)
    return exc


def test_a_payload_of_twenty_thousand_culprits_is_cut_where_it_arrives() -> None:
    data = _sent_payload() | {"pid": -1, "where": "worker 7"}
    data["culprits"] = [dict(data["culprits"][0], name=f"t{i}") for i in range(20_000)]
    start = time.perf_counter()
    d = ipydevice.diagnose(_carrying(data), namespace={})
    text = str(d) + d._repr_html_()
    assert time.perf_counter() - start < 5
    assert len(d.culprits) <= 16 and len(text) < 200_000
    assert any("20,000 culprits, the first 16 kept" in n for n in d.notes)


@pytest.mark.parametrize("field", ["headline", "message", "culprit name", "fix code", "devices"])
def test_ten_megabyte_strings_are_cut_where_they_arrive(field: str) -> None:
    big = "A" * 10_000_000
    data = _sent_payload() | {"pid": -1, "where": "worker 7"}
    if field == "culprit name":
        data["culprits"] = [dict(data["culprits"][0], name=big)]
    elif field == "fix code":
        data["fix"] = dict(data["fix"], code="x = 1\n" * 2_000_000)
    elif field == "devices":
        data["devices"] = [big] * 1000
    else:
        data[field] = big
    start = time.perf_counter()
    d = ipydevice.diagnose(_carrying(data), namespace={})
    text = str(d) + d._repr_html_() + "".join(f.code for f in d.fixes)
    assert time.perf_counter() - start < 5
    assert len(text) < 300_000
    assert any("was cut to ipydevice's bounds" in n for n in d.notes)


def test_a_payload_of_the_wrong_types_is_read_as_plain_data() -> None:
    class Hostile(dict):
        def get(self, *args):  # never called: the payload is read as a plain dict
            raise AssertionError("ran")

    data = _sent_payload() | {"pid": -1, "where": ["not", "text"], "target": "cuda'); x('"}
    data["culprits"] = [Hostile(name="h"), 7, {"name": 10**100, "device": None}]
    data["fix"] = dict(
        data["fix"], lineno="9", steps=[{"action": "reassign", "path": [["name", "os"]]}]
    )
    d = ipydevice.diagnose(_carrying(data), namespace={})
    assert d.target != "cuda'); x('" and all(not f.steps for f in d.fixes)
    assert [c.name for c in d.culprits] == [""]
    assert carried.received(Hostile(version=1)) is None
    # a traceback's text of 50 MB is read from its end, in bounded time
    start = time.perf_counter()
    text = "x\n" * 25_000_000 + _worker_text(FORGED_NOTE)
    d = ipydevice.diagnose(_reraised(ExceptionWrapper(text)), namespace={})
    assert d.is_device_error and time.perf_counter() - start < 10
