"""Exceptions that wrap the device error: DataLoader workers, torch.multiprocessing.spawn,
torchrun's ChildFailedError, process pools, exception groups and asyncio.TaskGroup.

Each wrapped error is one block of the panel; another process's error is told from
what it carries, and the notebook's own objects are never blamed for it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cells import FAILING_DATASET
from shells import panels, run, run_captured, singleton_shell

import ipydevice
from ipydevice.diagnosis.unwrap import last_line, unwrap

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent

CELL_DATASET = (
    FAILING_DATASET
    + """model = nn.Linear(4, 4).to("meta")
batch = torch.randn(3, 4)
"""
)


def _panel_text(cap) -> str:
    (panel,) = panels(cap)
    return str(panel["text/plain"])


@pytest.mark.slow
@pytest.mark.parametrize("hooked", [True, False], ids=["worker_init_fn", "plain"])
def test_a_dataloader_worker_error_in_the_notebook(hooked: bool) -> None:
    init = ", worker_init_fn=ipydevice.worker_init_fn" if hooked else ""
    with singleton_shell(reset=True) as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        run(shell, CELL_DATASET)
        run(shell, f"loader = DataLoader(ds, batch_size=2, num_workers=2{init})")
        cap, result = run_captured(shell, "for xb in loader:\n    out = model(xb)")
        assert "DataLoader worker process 0" in str(result.error_in_exec)
        text = _panel_text(cap)
        assert "failed in DataLoader worker 0, Dataset `ds` (Pairs)" in text, text
        d = ipydevice.diagnose(result.error_in_exec, namespace=shell.user_ns)
        # the notebook's own objects are not blamed for the worker's tensors
        assert not any(c.name in ("batch", "model", "xb", "ds") for c in d.culprits)
        assert not d.records
        if hooked:
            assert [c.where for c in d.culprits] == ["DataLoader worker 0"]
            assert d.culprits[0].device == "cpu" and d.target == "meta"
            assert "self.table" in d.culprits[0].name or "ds.table" in d.culprits[0].name
            # the fix came with the ExceptionWrapper the worker sent, not from its text
            assert d.fixes and d.fixes[0].title.endswith("(from DataLoader worker 0)")
        else:
            # the worker's Dataset is a copy of `ds`: what its failing line read is
            # named as the notebook writes it, said to be read in the worker
            assert [(c.name, c.device, c.where) for c in d.culprits] == [
                ("ds.proj", "meta", "DataLoader worker 0")
            ]
            assert d.target == "cpu" and d.fixes[0].code == "ds.proj.to('cpu')"
            assert any("worker_init_fn=ipydevice.worker_init_fn" in n for n in d.notes)


def test_an_exception_group_raised_outside_an_except_block_gets_a_panel() -> None:
    with singleton_shell(reset=True) as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        run(shell, "import torch, torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')")
        run(
            shell,
            "def attempt(x):\n    try:\n        model(x)\n    except RuntimeError as e:\n"
            "        return e",
        )
        cap, _ = run_captured(
            shell,
            "features = torch.randn(3, 4)\n"
            "errors = [attempt(features), ValueError('other')]\n"
            "raise ExceptionGroup('two failures', errors)",
        )
        text = _panel_text(cap)
        assert "exception 1 of 2 in the ExceptionGroup" in text, text
        assert "`x` is on cpu" in text or "`features` is on cpu" in text, text


def test_a_taskgroup_task_gets_a_panel() -> None:
    with singleton_shell(reset=True) as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        run(shell, "import asyncio, torch, torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')")
        run(shell, "async def step(x):\n    await asyncio.sleep(0)\n    return model(x)")
        cap, result = run_captured(
            shell,
            "features = torch.randn(3, 4)\n"
            "async with asyncio.TaskGroup() as tg:\n    tg.create_task(step(features))",
        )
        assert type(result.error_in_exec).__name__ == "ExceptionGroup"
        text = _panel_text(cap)
        assert "in the TaskGroup" in text, text
        assert "is on cpu" in text


def test_the_registry_leaves_other_exceptions_alone() -> None:
    assert unwrap(RuntimeError("Expected all tensors to be on the same device")) == []
    assert unwrap(ValueError("Caught nothing")) == []
    assert last_line("Traceback (most recent call last):\n  File 'x'\nRuntimeError: boom\n") == (
        "RuntimeError",
        "boom",
    )


def _script(tmp_path: Path, body: str, *args: str) -> str:
    script = tmp_path / "launch.py"
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    env.pop("IPYDEVICE_DEBUG", None)
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert "=== diagnosis" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout.partition("=== diagnosis")[2]


SPAWN = """
import os, sys, socket, torch, torch.nn as nn
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
    sock = socket.socket(); sock.bind(("127.0.0.1", 0)); port = sock.getsockname()[1]; sock.close()
    batch = torch.randn(3, 4)  # the launcher's own: never blamed
    try:
        mp.spawn(train, args=(2, port), nprocs=2)
    except Exception as exc:
        print("=== diagnosis")
        print(ipydevice.diagnose(exc))
"""


@pytest.mark.slow
def test_a_spawned_ranks_diagnosis_once(tmp_path: Path) -> None:
    out = _script(tmp_path, SPAWN)
    assert "failed in process 1" in out, out
    assert out.count("✗ batch in train: in rank 1/2 (as its traceback's text says):") == 1, out
    # the rank's fix crossed as text only: shown as its words, never offered as code
    assert "(from rank 1/2)" not in out and "process 1's traceback text suggests" in out, out


ELASTIC = """
import torch, torch.nn as nn
import torch.distributed as dist
from torch.distributed.launcher.api import LaunchConfig, elastic_launch
import ipydevice

@ipydevice.diagnosed
def train():
    dist.init_process_group("gloo")
    dist.barrier()  # both connected before rank 1 fails
    model = nn.Linear(4, 2).to("meta" if dist.get_rank() == 1 else "cpu")
    batch = torch.randn(3, 4)
    model(batch)

if __name__ == "__main__":
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=2, rdzv_backend="c10d",
                          rdzv_endpoint="127.0.0.1:0", max_restarts=0, monitor_interval=0.1)
    try:
        elastic_launch(config, train)()
    except Exception as exc:
        print(type(exc).__name__)
        print("=== diagnosis")
        print(ipydevice.diagnose(exc))
"""


@pytest.mark.slow
def test_an_elastic_launch_child_failed_error(tmp_path: Path) -> None:
    out = _script(tmp_path, ELASTIC)
    assert "failed in rank 1" in out, out
    assert out.count("✗ batch in train: in rank 1/2") == 1, out


def _task_error(decorated: bool) -> BaseException:
    """What ``ray.get`` raises in the driver for a task that failed with a device error:
    Ray's own ``RayTaskError``, built as Ray's worker builds it, its cause pickled across."""
    import pickle
    import traceback

    exceptions = pytest.importorskip("ray.exceptions")

    def step() -> None:
        model = torch.nn.Linear(4, 2).to("meta")
        batch = torch.randn(3, 4)
        model(batch)

    task = ipydevice.diagnosed(step) if decorated else step
    try:
        task()
    except RuntimeError as exc:
        cause = pickle.loads(pickle.dumps(exc))  # the task's process to the driver's
        text = traceback.format_exc()
    error = exceptions.RayTaskError(
        "step", text, cause, proctitle="ray::step", pid=4242, ip="127.0.0.1"
    )
    # sent to the driver, which raises it as an instance of the cause's class too
    return pickle.loads(pickle.dumps(error)).as_instanceof_cause()


@pytest.mark.parametrize("decorated", [True, False], ids=["diagnosed", "plain"])
def test_a_ray_task_error_shows_the_tasks_diagnosis(decorated: bool) -> None:
    error = _task_error(decorated)
    assert type(error).__name__ == "RayTaskError(RuntimeError)"
    batch = torch.randn(3, 4)  # the driver's own: never blamed
    d = ipydevice.diagnose(error, namespace={"batch": batch})
    assert d.is_device_error and d.failing_module == "Ray step (pid 4242)"
    assert not d.records
    if decorated:
        assert [c.where for c in d.culprits] == ["Ray step (pid 4242)"]
        assert d.culprits[0].name.startswith("batch in ") and d.culprits[0].device == "cpu"
        assert d.fixes and d.fixes[0].title.endswith("(from Ray step (pid 4242))")
    else:
        assert not d.culprits
        assert any("@ipydevice.diagnosed under @ray.remote" in n for n in d.notes)


POOL = """
import concurrent.futures as cf
import torch, torch.nn as nn
import ipydevice

@ipydevice.diagnosed
def step(n):
    model = nn.Linear(4, 2).to("meta")
    features = torch.randn(n, 4)
    return model(features)

if __name__ == "__main__":
    features = torch.randn(3, 4)  # the caller's own: never blamed
    with cf.ProcessPoolExecutor(1) as pool:
        try:
            pool.submit(step, 3).result()
        except RuntimeError as exc:
            print("=== diagnosis")
            print(ipydevice.diagnose(exc))
"""


@pytest.mark.slow
def test_a_process_pools_reraised_error(tmp_path: Path) -> None:
    out = _script(tmp_path, POOL)
    assert "failed in a pool worker process" in out, out
    assert out.count("✗ features in step: in a pool worker process:") == 1, out


ACCELERATE = """
import os, torch, torch.nn as nn
import torch.distributed as dist
from accelerate import notebook_launcher
import ipydevice

@ipydevice.diagnosed
def train():
    rank = dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", 0))
    model = nn.Linear(4, 2).to("meta" if rank == 1 else "cpu")
    batch = torch.randn(3, 4)
    model(batch)

if __name__ == "__main__":
    try:
        notebook_launcher(train, (), num_processes=2)
    except Exception as exc:
        print("=== diagnosis")
        print(ipydevice.diagnose(exc))
"""


@pytest.mark.slow
def test_accelerate_notebook_launcher(tmp_path: Path) -> None:
    pytest.importorskip("accelerate")
    out = _script(tmp_path, ACCELERATE)
    assert "failed in rank 1" in out, out
    assert out.count("✗ batch in train: in rank 1/2") == 1, out
    assert "rank 1's traceback text suggests" in out, out  # its words: text is never code


def test_an_error_diagnosed_in_another_process_and_sent_back_as_itself() -> None:
    """Dask, a queue, any transport that pickles the exception: the payload says
    which process diagnosed it, and that diagnosis is shown, not this namespace's."""
    import pickle

    from ipydevice.diagnosis import carried

    @ipydevice.diagnosed
    def step() -> None:
        model = torch.nn.Linear(4, 2).to("meta")
        batch = torch.randn(3, 4)
        model(batch)

    with pytest.raises(RuntimeError, match="expected device") as caught:
        step()
    sent = pickle.loads(pickle.dumps(caught.value))
    assert not any(c.rule == "remote" for c in ipydevice.diagnose(sent).culprits)  # its own
    assert carried.payload(sent) is not None
    data = vars(sent)[carried.ATTRIBUTE]  # as the other process sent it
    data.update(pid=data["pid"] + 1, where="worker tcp://10.0.0.2:4242")
    batch = torch.randn(3, 4)  # the client's own: never blamed
    d = ipydevice.diagnose(sent, namespace={"batch": batch})
    assert d.failing_module == "worker tcp://10.0.0.2:4242" and not d.records
    assert [c.where for c in d.culprits] == ["worker tcp://10.0.0.2:4242"]
