"""Fail fast, with a useful message, when the Hugging Face hub cannot be reached.

``transformers``/``datasets`` retry an unreachable hub for 20-50 s before failing with a generic
connection error (measured on these machines, see ``../shared/notes/stack-notes.md``). This module
checks first: a local directory or ``HF_HUB_OFFLINE=1`` with a cached copy passes, otherwise a
single TCP connect to the hub host (3 s timeout) decides.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

DEFAULT_ENDPOINT = "https://huggingface.co"


class HubUnreachableError(ConnectionError):
    """A hub model or dataset was requested while the hub cannot be reached."""


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """True when a TCP connection to the hub host (``HF_ENDPOINT`` or huggingface.co) opens.

    Always False with ``HF_HUB_OFFLINE=1``. Takes at most ``timeout_s`` seconds.
    """
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _in_local_cache(repo_id: str, kind: str) -> bool:
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id, repo_type=kind, local_files_only=True)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not cached"
        return False


def ensure_hub_reachable(repo_id: str, *, kind: str, offline_alternative: str) -> None:
    """Return if ``repo_id`` can be loaded (cached or hub reachable), else raise at once.

    Args:
        repo_id: hub id such as ``"FacebookAI/roberta-base"``.
        kind: ``"model"`` or ``"dataset"``.
        offline_alternative: what to use instead, named in the error message.

    Raises:
        HubUnreachableError: neither a cached copy nor the hub is available.
    """
    if os.path.isdir(repo_id) or hub_reachable() or _in_local_cache(repo_id, kind):
        return
    raise HubUnreachableError(
        f"the Hugging Face hub {kind} {repo_id!r} cannot be loaded: the hub is not reachable from "
        f"this machine (or HF_HUB_OFFLINE=1) and no cached copy exists. Use the offline "
        f"{kind} {offline_alternative!r} instead (e.g. PROFILE=smoke or PROFILE=local), or run "
        f"where https://huggingface.co is reachable."
    )
