"""roberta-base's parameter count by hand (the sizing lessons' tests check formulas with it)."""

from __future__ import annotations

# roberta-base, counted by hand from its config.json (vocab 50265, 514 positions, 1 token type,
# hidden 768, 12 layers, FFN 3072) with the classification head of RobertaForSequenceClassification.
H, FFN, L = 768, 3072, 12


EMBEDDINGS = 50265 * H + 514 * H + 1 * H + 2 * H  # word + position + type + LayerNorm


LAYER = 3 * (H * H + H) + (H * H + H) + 2 * H + (H * FFN + FFN) + (FFN * H + H) + 2 * H


HEAD = (H * H + H) + (H * 2 + 2)  # dense + out_proj (2 labels); no pooler


ROBERTA_BASE = EMBEDDINGS + L * LAYER + HEAD
