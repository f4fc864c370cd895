"""Is this kernel the project's environment? Run by the first cell of every notebook
(``%run kernel_check.py``); standard library only, since it checks that pt2aws is installed.

Raises:
    ModuleNotFoundError: pt2aws is not importable from this kernel; the message says how to fix it.
"""

import importlib.util
import sys

if importlib.util.find_spec("pt2aws") is None:
    raise ModuleNotFoundError(
        f"pt2aws is not installed for this kernel ({sys.executable}). Fix: in a terminal at the "
        "repository root run `make kernel`, then choose the kernel 'Python (pt2aws)' "
        "(Kernel > Change Kernel, once per notebook). SageMaker Studio terminal without make, "
        "at the repository root: `bash scripts/setup-env.sh python && python -m ipykernel "
        "install --user --name pt2aws --display-name 'Python (pt2aws)'`"
    )
