"""Test-only helpers shared by several test folders (``from support import ...``: pytest puts
``tests/`` on ``sys.path`` through ``tests/conftest.py``). Nothing in ``src/`` imports them."""
