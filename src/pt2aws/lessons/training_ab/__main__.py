"""``python -m pt2aws.lessons.training_ab trainer --<TrainConfig flags>``: the Trainer peer."""

from pt2aws.lessons.training_ab.trainer_peer import main

if __name__ == "__main__":
    main()
