"""Short review texts the inference tests and the benchmark-peer tests share."""

#: Six short reviews, four times: long and short, positive and negative (24 texts).
TEXTS = [
    "great phone, love the battery",
    "terrible service, the flight was delayed for hours",
    "ok",
    "the worst update ever, it broke everything I use every day",
    "best purchase this year!!!",
    "meh",
] * 4
