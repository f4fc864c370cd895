"""Notebook 00's EC2 route: the launch plan (:mod:`.plan`) and training in the DLC through SSM
(:mod:`.run`)."""
