"""The notebook tests' shared run: notebooks 00-03 executed ONCE per test session, in order, into
one run folder, through ``make run``'s own code (:func:`pt2aws.pipeline.run_notebooks`), on the
smoke profile with the smallest settings that still run every section.

Every notebook test reads :func:`executed` (the :class:`~pt2aws.rundir.RunDir` of that run). A test
that must run a notebook with other parameters (an exercise) calls :func:`execute_notebook`
into its own folder, starting from :func:`copy_of_executed_run` when the notebook needs what an
earlier notebook wrote (a trained model), so that nothing is trained twice.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from unittest import mock

import pytest

from pt2aws.pipeline import NOTEBOOKS, notebooks_dir, run_notebooks
from pt2aws.rundir import RunDir

#: Parameters of the shared run, per notebook (besides PROFILE="smoke" and RUN_DIR). Each
#: section runs, at the smallest size that still gives the tests a value to check.
SHARED_RUN_PARAMETERS: dict[str, dict] = {
    "01_finetune_multi_gpu.ipynb": {
        # 3 variants (baseline, one flag, the Trainer peer): each a subprocess on 2 cores
        "AB_VARIANTS": ["baseline", "+fused", "Trainer baseline"],
        # the SageMaker training job created against the local emulator
        "LAUNCH_SAGEMAKER_JOB": True,
        "AWS_TARGET": "emulator",
        "EXPLAIN_COMPILE": True,
        "COMPARE_PARALLELISM": True,
    },
    "02_local_inference.ipynb": {
        # p50/p90/p99 from 3 batch-1 calls (the notebook's 10 only sharpen the percentiles)
        "LATENCY_CALLS": 3,
    },
    "03_deploy_sagemaker_graviton.ipynb": {
        "LOAD_TEST_REQUESTS": 20,
        "LOAD_TEST_SECONDS": 10,
        "AGREEMENT_TEXTS": 200,  # the smoke validation split, as 02 times: 03 reuses its agreement
    },
}


def declared_parameters(name: str) -> set[str]:
    """The parameter names papermill sees in notebook ``name`` (it only warns on unknown ones)."""
    import papermill as pm

    return set(pm.inspect_notebook(str(notebooks_dir() / name)))


def execute_notebook(name: str, run_dir: str | Path, **parameters) -> Path:
    """Run notebook ``name`` (smoke profile) into ``run_dir`` as ``make run`` does; returns the
    executed notebook (``<run_dir>/notebooks/<name>``).

    Raises:
        AssertionError: a parameter the notebook does not declare (papermill would only warn).
        papermill.PapermillExecutionError: a cell failed.
    """
    unknown = set(parameters) - declared_parameters(name)
    assert not unknown, f"{name} lacks parameters {unknown}"
    run_notebooks(
        run_dir, profile="smoke", notebooks=(name,), extra_parameters=parameters, stream=False
    )
    return RunDir(run_dir).notebooks_dir / name


#: oneDNN capped below bf16 and VNNI for the shared run, as on a CPU without either (an AVX2
#: EPYC; a cap above a CPU's own level changes nothing): notebook 02 leaves bf16 and torchao
#: int8 out on every machine, so the tests of what follows from that (03 measures neither) run
#: everywhere. ONNX Runtime and MKL's fp32 ignore the cap (benchmarks/README.md).
SHARED_RUN_CAP = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}


@pytest.fixture(scope="session")
def executed(tmp_path_factory) -> RunDir:
    """Notebooks 00-03 run once, in order, into one run folder (about 2-4 minutes on 2 cores)."""
    run_dir = tmp_path_factory.mktemp("run")
    for name, params in SHARED_RUN_PARAMETERS.items():
        unknown = set(params) - declared_parameters(name)
        assert not unknown, f"{name} lacks parameters {unknown}"
    with mock.patch.dict(os.environ, SHARED_RUN_CAP):  # the notebooks' kernels inherit it
        run_notebooks(
            run_dir,
            profile="smoke",
            notebooks=NOTEBOOKS,
            per_notebook=SHARED_RUN_PARAMETERS,
            stream=False,
        )
    return RunDir(run_dir)


@pytest.fixture
def copy_of_executed_run(executed, tmp_path) -> RunDir:
    """A private copy of the shared run's folder (model, metrics, plots) to run one notebook
    again with other parameters, without training again; the shared run stays as it was."""
    target = tmp_path / "run"
    shutil.copytree(executed.root, target, ignore=shutil.ignore_patterns("checkpoints"))
    return RunDir(target)
