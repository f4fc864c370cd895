"""Until when AWS patches each image pt2aws can run on, and a warning once that date has passed.

AWS publishes security and bug fixes for a Deep Learning Container line (a repository and a
PyTorch minor version, e.g. ``pytorch-inference-arm64`` 2.6) until its *end of patch* (DLC
"Framework Support Policy"); the Deep Learning AMIs follow the same policy per PyTorch version.
The dates are in ``images.json`` beside this file (source ``dlc-support-data``, the
aws/deep-learning-containers support data; the DLAMI dates are marked UNVERIFIED there).
Choosing an image past its end of patch is allowed (it still runs) but warns with
:class:`ImageSupportWarning`, naming the newest supported one, or saying that none exists.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

IMAGES_PATH = Path(__file__).with_name("images.json")


class ImageSupportWarning(UserWarning):
    """The chosen image or AMI is past its end of patch (no more security fixes)."""


# one notice per image is enough, wherever it is checked from (a deploy checks it several times)
warnings.filterwarnings("once", category=ImageSupportWarning)


@lru_cache(maxsize=1)
def image_facts() -> dict:
    """``images.json``: registries, tags, support dates and AMI rules, each with its source."""
    return json.loads(IMAGES_PATH.read_text())


def minor_version(version: str) -> str:
    """``"2.6.0"`` -> ``"2.6"``; ``"2.10"`` stays ``"2.10"``."""
    return ".".join(version.split(".")[:2])


@dataclass(frozen=True)
class Support:
    """The patch support of one image line or AMI.

    Attributes:
        image: what it is, e.g. ``"pytorch-inference-arm64 2.6"`` or ``"DLAMI PyTorch 2.13"``.
        end_of_patch: the last day AWS patches it.
        newer: the newest supported line to move to, in words, or why there is none.
        source: the source entry of ``images.json`` (``url``, ``date``, ``verified`` ...).
    """

    image: str
    end_of_patch: datetime.date
    newer: str
    source: dict

    def past(self, today: datetime.date | None = None) -> bool:
        """True when ``today`` (default: today) is after the end of patch."""
        return (today or datetime.date.today()) > self.end_of_patch

    def describe(self, today: datetime.date | None = None) -> str:
        """One line: the date, whether it has passed, and what to use instead."""
        today = today or datetime.date.today()
        verified = "" if self.source.get("verified") else " (UNVERIFIED date)"
        if self.past(today):
            return (
                f"{self.image}: patch support ended {self.end_of_patch}{verified}, "
                f"{(today - self.end_of_patch).days} days ago: no more security fixes; {self.newer}"
            )
        days = (self.end_of_patch - today).days
        return f"{self.image}: patched until {self.end_of_patch}{verified} ({days} days left)"

    def as_dict(self, today: datetime.date | None = None) -> dict:
        """JSON-ready: ``{"image", "end_of_patch", "past", "message", "verified"}``."""
        return {
            "image": self.image,
            "end_of_patch": self.end_of_patch.isoformat(),
            "past": self.past(today),
            "message": self.describe(today),
            "verified": bool(self.source.get("verified")),
        }


def _newest_supported(versions: dict[str, str], today: datetime.date) -> str | None:
    alive = [v for v, eop in versions.items() if datetime.date.fromisoformat(eop) >= today]
    return max(alive, key=lambda v: tuple(int(p) for p in v.split("."))) if alive else None


def _newer_line(repository: str, today: datetime.date) -> str:
    support = image_facts()["support"]
    line = repository
    while line is not None:  # this line, then the line AWS continued it in
        eops = {v: dates[1] for v, dates in support["lines"].get(line, {}).items()}
        newest = _newest_supported(eops, today)
        if newest:
            return f"use {line} {newest} (patched until {eops[newest]})"
        line = support["successors"].get(line)
    if repository.startswith("pytorch-inference"):
        return (
            "AWS publishes no newer PyTorch CPU inference DLC: deploy your own image "
            "(image='custom', pt2aws's serving container)"
        )
    return "no supported successor is known"


def dlc_support(repository: str, version: str, today: datetime.date | None = None) -> Support:
    """Patch support of the DLC line ``repository`` at PyTorch ``version``.

    Args:
        repository: e.g. ``"pytorch-inference-arm64"``, ``"pytorch-training"``, ``"pytorch"``.
        version: PyTorch version, e.g. ``"2.6.0"`` or ``"2.6"``.
        today: the date to judge ``newer`` by (default: today).

    Raises:
        KeyError: no support data for that line and version; the message lists the known ones.
    """
    today = today or datetime.date.today()
    support = image_facts()["support"]
    lines = support["lines"]
    minor = minor_version(version)
    if minor not in lines.get(repository, {}):
        known = {line: sorted(v) for line, v in lines.items()}
        raise KeyError(f"no patch-support data for {repository} {minor}; known: {known}")
    facts = image_facts()
    return Support(
        image=f"{repository} {minor}",
        end_of_patch=datetime.date.fromisoformat(lines[repository][minor][1]),
        newer=_newer_line(repository, today),
        source=dict(facts["sources"][support["source"]], id=support["source"]),
    )


def dlami_support(pytorch_version: str, today: datetime.date | None = None) -> Support:
    """Patch support of the GPU Deep Learning AMI for ``pytorch_version`` (dates UNVERIFIED).

    Raises:
        KeyError: no support data for that version; the message lists the known ones.
    """
    today = today or datetime.date.today()
    facts = image_facts()
    table = facts["dlami"]["pytorch_versions"]
    versions = table["versions"]
    minor = minor_version(pytorch_version)
    if minor not in versions:
        raise KeyError(f"no patch-support data for DLAMI PyTorch {minor}; known: {list(versions)}")
    newest = _newest_supported(versions, today)
    return Support(
        image=f"DLAMI PyTorch {minor}",
        end_of_patch=datetime.date.fromisoformat(versions[minor]),
        newer=f"use the DLAMI for PyTorch {newest}" if newest else "no supported DLAMI is known",
        source=dict(facts["sources"][table["support_source"]], id=table["support_source"]),
    )


@contextlib.contextmanager
def reported_by_caller():
    """Silence :class:`ImageSupportWarning` inside the block: for a function whose result
    carries each image's support message and whose caller prints it (a launch plan, the chosen
    serving image), so that a notebook shows the notice once, not also as a warning with its
    source line."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ImageSupportWarning)
        yield


def warn_if_past(support: Support, today: datetime.date | None = None) -> bool:
    """Warn (:class:`ImageSupportWarning`) when ``support`` is past its end of patch.

    Returns:
        True when it is past (and a warning was issued).
    """
    if not support.past(today):
        return False
    message = support.describe(today)
    # a warning, not also a log line: with no logging configured Python prints WARNING records
    # to stderr as well, and a notebook showed the same notice twice per cell
    warnings.warn(message, ImageSupportWarning, stacklevel=3)
    return True
