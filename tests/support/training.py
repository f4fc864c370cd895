"""Settings of the tiny training runs the train tests compare."""

#: Runs whose batch layouts must give the same losses: dropout 0, plain shuffled batches
#: (bucketing groups per global batch), fp32 and fused AdamW forced (``auto`` measures per
#: batch shape, so runs of other shapes could choose differently on another CPU).
TINY = dict(
    profile="smoke",
    max_train_samples=200,
    max_eval_samples=41,
    max_steps=6,
    logging_steps=1,
    num_threads=1,  # 2 threads were 5-10x slower on the shared, loaded 2-core test machine
    dropout=0.0,
    length_bucketing=False,
    bf16="off",
    fused_adamw="on",
)
