"""The first cell of every notebook (``%run kernel_check.py``): is this kernel the project's
environment? If not, one line with the fix; if so, pt2aws's own errors in later cells show as
one line too (``PT2AWS_DEBUG=1``: the full traceback). Standard library until pt2aws is found."""

import importlib.util
import sys


class KernelCheckError(ModuleNotFoundError):
    def _render_traceback_(self):  # IPython shows this instead of the traceback
        return [f"ModuleNotFoundError: {self}"]


if importlib.util.find_spec("pt2aws") is None:
    raise KernelCheckError(
        f"pt2aws is not installed for this kernel ({sys.executable}). Fix: in a terminal at the "
        "repository root run `make kernel`, then choose the kernel 'Python (pt2aws)' "
        "(Kernel > Change Kernel, once per notebook). SageMaker Studio terminal without make, "
        "at the repository root: `bash scripts/setup-env.sh python && python -m ipykernel "
        "install --user --name pt2aws --display-name 'Python (pt2aws)'`"
    )

from pt2aws.errors import show_user_errors_in_one_line  # noqa: E402

show_user_errors_in_one_line()
