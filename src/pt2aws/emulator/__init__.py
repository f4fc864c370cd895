"""A local AWS control plane (moto on 127.0.0.1) for notebooks, workshops and tests."""

from pt2aws.emulator.server import Emulator, start

__all__ = ["Emulator", "start"]
