import subprocess
import sys


def test_every_public_name_resolves_and_import_stays_cheap():
    """``import pt2aws`` loads no torch/boto3/sagemaker; every name in __all__ resolves."""
    code = (
        "import sys, pt2aws\n"
        "heavy = [m for m in ('torch', 'boto3', 'sagemaker', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "missing = [n for n in pt2aws.__all__ if getattr(pt2aws, n, None) is None]\n"
        "assert not missing, missing\n"
        "print(len(pt2aws.__all__))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout) >= 15


def test_unknown_attribute_is_an_attribute_error():
    import pytest

    import pt2aws

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pt2aws.nope  # noqa: B018
