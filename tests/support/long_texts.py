"""A text far over the smoke model's token limit, and a short one."""

LONG = "great phone, really great battery and a lovely screen. " * 60  # far over 48 tokens


SHORT = "awful service"
