"""``python -m pt2aws.bench trainer --<TrainConfig flags>``: the HF Trainer peer of the A/B."""

from pt2aws.bench.trainer_peer import main

if __name__ == "__main__":
    main()
