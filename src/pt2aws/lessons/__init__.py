"""Lessons: code notebooks 00 and 01 teach with, beside the recipe (nothing in the core imports
it): :mod:`.ec2` (notebook 00's EC2 route); :mod:`.compile_explained`, :mod:`.parallelism` and
:mod:`.training_ab` with :mod:`.trainer_peer` (notebook 01: ``torch.compile``, DDP/FSDP/TP
memory, the training A/B)."""
