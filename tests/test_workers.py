"""Worker processes and ranks diagnose their own errors: ``ipydevice.worker_init_fn``
and ``@ipydevice.diagnosed``, on real DataLoader workers, ``torch.multiprocessing.spawn``
and torchrun (gloo, CPU)."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cells import FAILING_DATASET

import ipydevice
from ipydevice.diagnosis import carried

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent

DATASET = FAILING_DATASET

SPAWN = """
import os, sys, torch, torch.nn as nn
import torch.distributed as dist
import torch.multiprocessing as mp
import ipydevice

@ipydevice.diagnosed
def train(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    dist.barrier()  # both connected before rank 1 fails
    model = nn.Linear(4, 2).to("meta" if rank == 1 else "cpu")
    batch = torch.randn(3, 4)
    model(batch)
    dist.destroy_process_group()

if __name__ == "__main__":
    try:
        mp.spawn(train, args=(2, int(sys.argv[1])), nprocs=2)
    except Exception as exc:
        print(type(exc).__name__)
        print(str(exc))
        d = ipydevice.diagnose(exc)
        print("=== panel")
        print(d)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def python(script: Path, *args: str, timeout: int = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    env.pop("IPYDEVICE_DEBUG", None)  # the ranks' own torch internals stay quiet
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=script.parent,
    )


def test_diagnosed_attaches_and_reraises_unchanged() -> None:
    @ipydevice.diagnosed
    def step() -> None:
        model = torch.nn.Linear(4, 2).to("meta")
        batch = torch.randn(3, 4)
        model(batch)

    with pytest.raises(RuntimeError) as caught:
        step()
    data = carried.payload(caught.value)
    assert data is not None and data["where"] == f"process {os.getpid()}"
    assert data["culprits"] and data["fix"]
    back = pickle.loads(pickle.dumps(caught.value))
    assert carried.payload(back) == data


def test_diagnosed_leaves_other_errors_alone() -> None:
    @ipydevice.diagnosed()
    def step() -> None:
        raise ValueError("not about devices")

    with pytest.raises(ValueError, match="not about devices") as caught:
        step()
    assert carried.payload(caught.value) is None and not hasattr(caught.value, "__notes__")


def test_worker_init_fn_composes_with_yours_and_pickles() -> None:
    seen: list[int] = []
    composed = ipydevice.worker_init_fn(seen.append)
    composed(3)
    assert seen == [3]
    plain = pickle.loads(pickle.dumps(ipydevice.worker_init_fn(print)))
    assert callable(plain)
    # outside a worker it changes nothing in the main process's DataLoader machinery
    from torch.utils.data._utils import worker

    assert not getattr(worker.ExceptionWrapper, "_ipydevice", False)


@pytest.mark.slow
def test_a_dataloader_worker_carries_its_diagnosis(tmp_path: Path) -> None:
    script = tmp_path / "loader.py"
    script.write_text(
        DATASET
        + textwrap.dedent("""
        loader = DataLoader(ds, batch_size=2, num_workers=2,
                            worker_init_fn=ipydevice.worker_init_fn)
        if __name__ == "__main__":
            try:
                next(iter(loader))
            except RuntimeError as exc:
                print(str(exc))
        """)
    )
    done = python(script)
    assert "Caught RuntimeError in DataLoader worker process 0" in done.stdout, done.stderr[-3000:]
    (note,) = carried.parse_notes(done.stdout)
    assert note["where"] == "DataLoader worker 0"
    assert note["culprits"][0]["name"] == "ds.table"  # the Dataset as the worker names it
    assert note["culprits"][0]["device"] == "cpu" and note["target"] == "meta"


@pytest.mark.slow
def test_a_spawned_rank_carries_its_diagnosis(tmp_path: Path) -> None:
    script = tmp_path / "spawned.py"
    script.write_text(SPAWN)
    done = python(script, str(free_port()))
    out = done.stdout
    assert out.startswith("ProcessRaisedException"), done.stderr[-3000:]
    notes = carried.parse_notes(out.partition("=== panel")[0])
    assert [n["where"] for n in notes] == ["rank 1/2"]
    assert notes[0]["culprits"][0]["name"].startswith("batch")


TORCHRUN = """
import torch, torch.nn as nn
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
import ipydevice

@record
@ipydevice.diagnosed
def main():
    dist.init_process_group("gloo")
    dist.barrier()  # both ranks connected before rank 1 fails: it is the root cause
    model = nn.Linear(4, 2).to("meta" if dist.get_rank() == 1 else "cpu")
    batch = torch.randn(3, 4)
    model(batch)
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
"""


@pytest.mark.slow
def test_torchrun_root_cause_shows_the_ranks_note(tmp_path: Path) -> None:
    script = tmp_path / "ddp.py"
    script.write_text(TORCHRUN)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node=2",
            "--master_addr=127.0.0.1",
            f"--master_port={free_port()}",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
        cwd=tmp_path,
    )
    assert done.returncode != 0
    summary = done.stderr[done.stderr.index("Root Cause (first observed failure)") :]
    assert "rank      : 1" in summary, summary[-3000:]
    notes = carried.parse_notes(summary)
    assert [n["where"] for n in notes] == ["rank 1/2 (local 1)"] or [n["where"] for n in notes] == [
        "rank 1/2"
    ], summary[-3000:]
    assert notes[0]["culprits"][0]["name"].startswith("batch")
