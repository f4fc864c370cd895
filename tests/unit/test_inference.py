import pytest

from pt2aws.inference import Predictor, classification_metrics


def test_predictor_batches_preserve_input_order(smoke_model_dir):
    texts = [
        "a much longer text about a terrible flight that was delayed",
        "ok",
        "great phone",
        "bad",
    ] * 5
    predictor = Predictor(str(smoke_model_dir), batch_size=3)
    one_by_one = [Predictor(str(smoke_model_dir), batch_size=1).predict([t])[0] for t in texts[:4]]
    batched = predictor.predict(texts)
    assert len(batched) == 20
    assert [b["label"] for b in batched[:4]] == [o["label"] for o in one_by_one]
    probs = predictor.predict_proba(texts)
    assert probs.shape == (20, 2)
    assert probs.sum(-1).sub(1).abs().max() < 1e-5


def test_predictor_caps_max_length_at_512(smoke_model_dir):
    assert Predictor(str(smoke_model_dir)).max_length <= 512


def test_classification_metrics_by_hand():
    m = classification_metrics([0, 0, 1, 1], [0, 1, 1, 1], ["neg", "pos"])
    assert m["accuracy"] == 0.75
    assert m["confusion_matrix"] == [[1, 1], [0, 2]]
    # F1(neg) = 2*1*0.5/1.5 = 0.6667, F1(pos) = 2*(2/3)*1/(5/3) = 0.8
    assert m["f1_per_class"]["neg"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx((2 / 3 + 0.8) / 2)
